package yaml_test

import (
	"errors"
	"runtime"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/codec/yaml"
)

type order struct {
	ID    string   `yaml:"id"`
	Qty   int      `yaml:"qty"`
	Items []string `yaml:"items"`
}

func TestRoundTripAndContentTypes(t *testing.T) {
	c := yaml.New()
	body, err := c.Encode(order{ID: "o-1", Qty: 2, Items: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	var back order
	if err := c.Decode(body, "application/yaml", &back); err != nil || back.ID != "o-1" || back.Qty != 2 || len(back.Items) != 2 {
		t.Fatalf("%s → %+v, %v", body, back, err)
	}
	// Another producer's indentation and quoting.
	other := "id: 'o-2'\nqty: 3\nitems:\n    - \"x\"\n"
	if err := c.Decode([]byte(other), "text/yaml", &back); err != nil || back.ID != "o-2" || back.Items[0] != "x" {
		t.Fatalf("%+v, %v", back, err)
	}
	for ct, want := range map[string]bool{
		"application/yaml": true, "application/x-yaml": true, "text/yaml": true, "TEXT/X-YAML; charset=utf-8": true,
		"application/vnd.k8s+yaml": true, "": false, "application/json": false, "text/plain": false,
	} {
		if c.Accepts(ct) != want {
			t.Errorf("Accepts(%q) = %t", ct, !want)
		}
	}
	if got, err := codec.Lookup("yaml"); err != nil || got.ContentType() != "application/yaml" {
		t.Errorf("the registry: %v, %v", got, err)
	}
}

func TestJSONTagsAndAny(t *testing.T) {
	type tagged struct {
		OrderID string `json:"orderId"`
	}
	c := yaml.New()
	body, err := c.Encode(tagged{OrderID: "o-3"})
	if err != nil || !strings.Contains(string(body), "orderId: o-3") {
		t.Fatalf("%s, %v", body, err)
	}
	var v any
	if err := c.Decode(body, "application/yaml", &v); err != nil || v.(map[string]any)["orderId"] != "o-3" {
		t.Fatalf("%v, %v", v, err)
	}
}

func TestMalformedIsParked(t *testing.T) {
	var v order
	err := yaml.New().Decode([]byte("id: [unclosed\n  secret: payload"), "application/yaml", &v)
	var de *acemq.DecodeError
	if !errors.As(err, &de) || de.Retryable || strings.Contains(err.Error(), "\n") {
		t.Fatalf("%v", err)
	}
}

// Aliases nested nine deep expand to 9^9 strings if copied; decoding must
// neither hang nor exhaust memory.
func TestAliasExpansionIsBounded(t *testing.T) {
	doc := "a: &a [x,x,x,x,x,x,x,x,x]\n"
	prev := "a"
	for _, n := range []string{"b", "c", "d", "e", "f", "g", "h", "i"} {
		doc += n + ": &" + n + " [*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + ",*" + prev + "]\n"
		prev = n
	}
	var v any
	var before, after runtime.MemStats
	runtime.GC()
	runtime.ReadMemStats(&before)
	_ = yaml.New().Decode([]byte(doc), "application/yaml", &v)
	runtime.ReadMemStats(&after)
	if n := after.TotalAlloc - before.TotalAlloc; n > 8<<20 {
		t.Errorf("a %d-byte document made the decoder allocate %d bytes", len(doc), n)
	}
	t.Logf("%d bytes for a %d-byte document", after.TotalAlloc-before.TotalAlloc, len(doc))
}

// A 22-byte document on which go-yaml v1.19.2 dereferences nil (found by
// FuzzDecode) is a malformed body like any other: a non-retryable
// *acemq.DecodeError, not a panic.
func TestDecodePanicIsADecodeError(t *testing.T) {
	var o order
	err := yaml.New().Decode([]byte("0b:\n70%: 8\nitems: !00 "), "application/yaml", &o)
	var de *acemq.DecodeError
	if !errors.As(err, &de) || de.Retryable || de.ContentType != "application/yaml" {
		t.Fatalf("Decode = %v, want a non-retryable *acemq.DecodeError", err)
	}
	t.Log(err)
}

func FuzzDecode(f *testing.F) {
	c := yaml.New()
	f.Add([]byte("id: o-1\nqty: 2\nitems: [a, b]\n"))
	f.Add([]byte("a: &a [x]\nb: [*a, *a]\n"))
	f.Add([]byte("!!binary AAAA"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var o order
		var v any
		_ = c.Decode(body, "application/yaml", &o)
		if err := c.Decode(body, "application/yaml", &v); err == nil {
			if _, err := c.Encode(v); err != nil {
				t.Logf("decoded but not encodable: %v", err)
			}
		}
	})
}
