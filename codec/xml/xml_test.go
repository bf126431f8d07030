package xml_test

import (
	"errors"
	"reflect"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/codec/xml"
)

type order struct {
	ID    string   `xml:"id"`
	Qty   int      `xml:"qty"`
	Items []string `xml:"items"`
}

func TestRoundTripAndContentTypes(t *testing.T) {
	c := xml.New()
	body, err := c.Encode(order{ID: "o-1", Qty: 2, Items: []string{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	var back order
	if err := c.Decode(body, "application/xml", &back); err != nil || back.ID != "o-1" || back.Qty != 2 || !reflect.DeepEqual(back.Items, []string{"a", "b"}) {
		t.Fatalf("%s → %+v, %v", body, back, err)
	}
	for ct, want := range map[string]bool{"application/xml": true, "text/xml": true, "application/atom+xml": true, "APPLICATION/XML;charset=utf-8": true, "": false, "application/json": false} {
		if c.Accepts(ct) != want {
			t.Errorf("Accepts(%q) = %t", ct, !want)
		}
	}
	if _, err := codec.Lookup("xml"); err != nil {
		t.Error(err)
	}
}

// Both list shapes read: the item repeated (acemq-go-amqp) and wrapped in
// an element of its name (Jackson's default).
func TestBothListShapes(t *testing.T) {
	c := xml.New()
	for name, doc := range map[string]string{
		"repeated": `<order><id>o-1</id><items>a</items><items>b</items><qty>2</qty></order>`,
		"wrapped":  "<Order>\n  <id>o-1</id>\n  <items>\n    <items>a</items>\n    <items>b</items>\n  </items>\n  <qty>2</qty>\n</Order>",
	} {
		var o order
		if err := c.Decode([]byte(doc), "application/xml", &o); err != nil || !reflect.DeepEqual(o.Items, []string{"a", "b"}) || o.Qty != 2 {
			t.Errorf("%s: %+v, %v", name, o, err)
		}
		var v any
		if err := c.Decode([]byte(doc), "text/xml", &v); err != nil {
			t.Fatal(err)
		}
		if got := v.(map[string]any)["items"]; !reflect.DeepEqual(got, []any{"a", "b"}) {
			t.Errorf("%s into any: items %#v", name, got)
		}
	}
	// A single wrapped item.
	var o order
	if err := c.Decode([]byte(`<o><items><items>only</items></items></o>`), "application/xml", &o); err != nil || !reflect.DeepEqual(o.Items, []string{"only"}) {
		t.Errorf("one wrapped item: %+v, %v", o, err)
	}
}

func TestDTDsAndEntitiesRefused(t *testing.T) {
	c := xml.New()
	for name, doc := range map[string]string{
		"external entity": `<?xml version="1.0"?><!DOCTYPE o [<!ENTITY x SYSTEM "file:///etc/passwd">]><o><id>&x;</id></o>`,
		"laughs":          `<!DOCTYPE o [<!ENTITY a "aaaaaaaaaa"><!ENTITY b "&a;&a;&a;&a;&a;&a;&a;&a;&a;&a;">]><o><id>&b;</id></o>`,
		"doctype only":    `<!DOCTYPE o SYSTEM "http://example.com/o.dtd"><o/>`,
		"undeclared":      `<o><id>&x;</id></o>`,
		"two roots":       `<o/><o/>`,
		"text outside":    `hello<o/>`,
		"unclosed":        `<o><id>`,
		"empty":           ``,
	} {
		var o order
		err := c.Decode([]byte(doc), "application/xml", &o)
		var de *acemq.DecodeError
		if !errors.As(err, &de) || de.Retryable {
			t.Errorf("%s: %v, want a non-retryable DecodeError", name, err)
		}
		if strings.Contains(name, "entity") && !strings.Contains(err.Error(), "DTD") {
			t.Errorf("%s: the error does not say why: %v", name, err)
		}
	}
	var o order
	if err := c.Decode([]byte(`<o><id>a &amp; b &lt;c&gt;</id></o>`), "application/xml", &o); err != nil || o.ID != "a & b <c>" {
		t.Errorf("the predefined entities: %q, %v", o.ID, err)
	}
}

// A map (the CLI's JSON input) is written as elements and read back.
func TestMaps(t *testing.T) {
	c := xml.New(xml.WithRoot("order"))
	in := map[string]any{"id": "o-1", "items": []any{"a", "b"}, "address": map[string]any{"city": "Leeds"}, "qty": int64(2)}
	body, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	const want = `<order><address><city>Leeds</city></address><id>o-1</id><items>a</items><items>b</items><qty>2</qty></order>`
	if string(body) != want {
		t.Fatalf("got  %s\nwant %s", body, want)
	}
	var back map[string]any
	if err := c.Decode(body, "application/xml", &back); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(back, map[string]any{"id": "o-1", "items": []any{"a", "b"}, "address": map[string]any{"city": "Leeds"}, "qty": "2"}) {
		t.Fatalf("back: %#v", back)
	}
	if _, err := c.Encode(map[string]any{"bad name": 1}); err == nil {
		t.Error("an invalid element name was written")
	}
}

func FuzzDecode(f *testing.F) {
	c := xml.New()
	f.Add([]byte(`<order><id>o-1</id><items><items>a</items></items></order>`))
	f.Add([]byte(`<!DOCTYPE o [<!ENTITY a "x">]><o>&a;</o>`))
	f.Add([]byte(`<a x="1"><a><a/></a></a>`))
	f.Fuzz(func(t *testing.T, body []byte) {
		var o order
		var v any
		_ = c.Decode(body, "application/xml", &o)
		_ = c.Decode(body, "application/xml", &v)
	})
}
