package codec_test

import (
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
)

func TestBuiltInNames(t *testing.T) {
	for name, want := range map[string]acemq.Codec{"json": acemq.JSON, "JSON": acemq.JSON, "text": acemq.Text, "string": acemq.Text, "bytes": acemq.Bytes} {
		c, err := codec.Lookup(name)
		if err != nil || c != want {
			t.Errorf("Lookup(%q) = %v, %v", name, c, err)
		}
	}
}

func TestUnknownNameSaysHowToGetIt(t *testing.T) {
	_, err := codec.Lookup("avro")
	if err == nil || !strings.Contains(err.Error(), "avro.NewFixed") || !strings.Contains(err.Error(), "json") {
		t.Fatalf("Lookup(avro) = %v", err)
	}
	_, err = codec.Lookup("msgpack")
	if err == nil || !strings.Contains(err.Error(), `"msgpack"`) {
		t.Fatalf("Lookup(msgpack) = %v", err)
	}
}

func TestRegister(t *testing.T) {
	codec.Register("Test-Text.v1", acemq.Text)
	if c, err := codec.Lookup("test-text.v1"); err != nil || c != acemq.Text {
		t.Fatalf("Lookup = %v, %v", c, err)
	}
	for name, f := range map[string]func(){
		"twice":    func() { codec.Register("test-text.v1", acemq.Text) },
		"nil":      func() { codec.Register("nil-codec", nil) },
		"bad name": func() { codec.Register("a b", acemq.Text) },
	} {
		func() {
			defer func() {
				if recover() == nil {
					t.Errorf("%s: Register did not panic", name)
				}
			}()
			f()
		}()
	}
}

func TestReading(t *testing.T) {
	c, err := codec.Reading("json", "text")
	if err != nil {
		t.Fatal(err)
	}
	if c.ContentType() != "application/json" {
		t.Errorf("writes %q", c.ContentType())
	}
	var s string
	if err := c.Decode([]byte("hi"), "text/plain", &s); err != nil || s != "hi" {
		t.Errorf("text through Reading: %q, %v", s, err)
	}
	if c.Accepts("application/xml") {
		t.Error("accepts XML without an XML codec")
	}
	if _, err := codec.Reading("json", "nope"); err == nil {
		t.Error("an unknown name was accepted")
	}
}
