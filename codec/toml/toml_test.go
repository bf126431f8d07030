package toml_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/codec/toml"
	"github.com/acemq/acemq/internal/allocbound"
)

type order struct {
	ID    string   `toml:"id"`
	Qty   int      `toml:"qty"`
	Items []string `toml:"items"`
}

func TestRoundTripAndContentTypes(t *testing.T) {
	c := toml.New()
	body, err := c.Encode(order{ID: "o-1", Qty: 2, Items: []string{"a"}})
	if err != nil {
		t.Fatal(err)
	}
	var back order
	if err := c.Decode(body, "application/toml", &back); err != nil || back.ID != "o-1" || back.Qty != 2 {
		t.Fatalf("%s → %+v, %v", body, back, err)
	}
	// Another producer's quoting.
	if err := c.Decode([]byte("id = 'o-2'\nqty = 3\n"), "text/toml", &back); err != nil || back.ID != "o-2" {
		t.Fatalf("%+v, %v", back, err)
	}
	var v any
	if err := c.Decode(body, "application/toml", &v); err != nil || v.(map[string]any)["id"] != "o-1" {
		t.Fatalf("into any: %v, %v", v, err)
	}
	for ct, want := range map[string]bool{"application/toml": true, "text/toml": true, "application/x.cfg+toml": true, "": false, "application/json": false} {
		if c.Accepts(ct) != want {
			t.Errorf("Accepts(%q) = %t", ct, !want)
		}
	}
	if _, err := codec.Lookup("toml"); err != nil {
		t.Error(err)
	}
}

// A TOML document is a table: nothing else is written or read.
func TestTopLevelTableOnly(t *testing.T) {
	c := toml.New()
	for _, v := range []any{"a string", 42, []string{"a"}, map[int]string{1: "a"}, nil} {
		if b, err := c.Encode(v); err == nil {
			t.Errorf("Encode(%#v) = %q, want a refusal", v, b)
		}
	}
	var s string
	var de *acemq.DecodeError
	if err := c.Decode([]byte(`x = 1`), "application/toml", &s); !errors.As(err, &de) || de.Retryable {
		t.Errorf("into a string: %v", err)
	}
	var o order
	if err := c.Decode([]byte(`id = `), "application/toml", &o); !errors.As(err, &de) || de.Retryable {
		t.Errorf("malformed: %v", err)
	}
	if b, err := c.Encode(&order{ID: "p"}); err != nil || len(b) == 0 {
		t.Errorf("a pointer to a struct: %q, %v", b, err)
	}
}

// tomlBytesPerByte bounds what Decode allocates per body byte, and
// tomlBytesFixed what it allocates besides (docs/codecs.md): measured
// worst, dotted keys (a.a.a…, a table per dot), about 320.
const (
	tomlBytesPerByte = 512
	tomlBytesFixed   = 64 << 10
)

func FuzzDecode(f *testing.F) {
	c := toml.New()
	f.Add([]byte("id = 'o-1'\nqty = 2\nitems = ['a']\n"))
	f.Add([]byte("[a.b.c]\nd = 1979-05-27T07:32:00Z\n"))
	f.Add([]byte("x = [[[[[[1]]]]]]"))
	f.Add([]byte("x = " + strings.Repeat("[", 4000) + strings.Repeat("]", 4000)))
	f.Add([]byte("a" + strings.Repeat(".a", 4000) + " = 1"))
	f.Fuzz(func(t *testing.T, body []byte) {
		var o order
		var v any
		allocbound.Check(t, len(body), tomlBytesPerByte, tomlBytesFixed, func() { _ = c.Decode(body, "application/toml", &o) })
		allocbound.Check(t, len(body), tomlBytesPerByte, tomlBytesFixed, func() { _ = c.Decode(body, "application/toml", &v) })
	})
}

func TestBounds(t *testing.T) {
	var v any
	for name, deep := range map[string]func(n int) string{
		"arrays": func(n int) string { return "x = " + strings.Repeat("[", n) + strings.Repeat("]", n) },
		// x = {a = {a = 1}} nests two tables: x and x.a.
		"inline tables": func(n int) string { return "x = " + strings.Repeat("{a = ", n) + "1" + strings.Repeat("}", n) },
		// a.a.a = 1 nests two: a and a.a.
		"dotted keys": func(n int) string { return "a" + strings.Repeat(".a", n) + " = 1" },
		// [a.a] nests two.
		"a table header": func(n int) string { return "[a" + strings.Repeat(".a", n-1) + "]\nx = 1" },
	} {
		if err := toml.New().Decode([]byte(deep(toml.DefaultMaxDepth)), "application/toml", &v); err != nil {
			t.Errorf("%s %d deep: %v", name, toml.DefaultMaxDepth, err)
		}
		err := toml.New().Decode([]byte(deep(toml.DefaultMaxDepth+1)), "application/toml", &v)
		var de *acemq.DecodeError
		if !errors.As(err, &de) || de.Retryable || !errors.Is(err, acemq.ErrTooDeep) ||
			!strings.Contains(err.Error(), "body nests deeper than the toml codec's limit of 128 levels") {
			t.Errorf("%s %d deep: %v", name, toml.DefaultMaxDepth+1, err)
		}
	}
	big := []byte("x = '" + strings.Repeat("y", toml.DefaultMaxBodySize) + "'")
	err := toml.New().Decode(big, "application/toml", &v)
	if !errors.Is(err, acemq.ErrTooLarge) || !strings.Contains(err.Error(), "body of 524294 bytes exceeds the toml codec's limit of 524288") {
		t.Fatalf("over the size bound: %v", err)
	}
	c := toml.New(toml.WithMaxBodySize(len(big)), toml.WithMaxDepth(1))
	if err := c.Decode(big, "application/toml", &v); err != nil {
		t.Fatalf("WithMaxBodySize: %v", err)
	}
	if err := c.Decode([]byte("x = [[1]]"), "application/toml", &v); !errors.Is(err, acemq.ErrTooDeep) {
		t.Fatalf("WithMaxDepth(1): %v", err)
	}
}

// A bound of zero or less is a mistake, refused at start-up.
func TestNonPositiveBoundPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "toml: New needs positive bounds") {
			t.Errorf("recovered %v", r)
		}
	}()
	toml.New(toml.WithMaxBodySize(-1))
}
