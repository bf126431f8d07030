package xml_test

import (
	"errors"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/codec/xml"
	"github.com/acemq/acemq/internal/allocbound"
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

// xmlBytesPerByte bounds what Decode allocates per body byte, and
// xmlBytesFixed what it allocates besides (docs/codecs.md): measured
// worst, a body of empty elements, about 140.
const (
	xmlBytesPerByte = 192
	xmlBytesFixed   = 64 << 10
)

func FuzzDecode(f *testing.F) {
	c := xml.New()
	f.Add([]byte(`<order><id>o-1</id><items><items>a</items></items></order>`))
	f.Add([]byte(`<!DOCTYPE o [<!ENTITY a "x">]><o>&a;</o>`))
	f.Add([]byte(`<a x="1"><a><a/></a></a>`))
	f.Add([]byte("<r>" + strings.Repeat("<a/>", 2000) + "</r>"))
	f.Add([]byte(strings.Repeat("<a>", 200) + strings.Repeat("</a>", 200)))
	f.Fuzz(func(t *testing.T, body []byte) {
		var o order
		var v any
		allocbound.Check(t, len(body), xmlBytesPerByte, xmlBytesFixed, func() { _ = c.Decode(body, "application/xml", &o) })
		allocbound.Check(t, len(body), xmlBytesPerByte, xmlBytesFixed, func() { _ = c.Decode(body, "application/xml", &v) })
	})
}

// A body of empty elements cost about 200 bytes of allocation per byte (a
// 1 MB body, 208 MB); copying tokens that need no copy and the list
// unwrapping's bookkeeping were most of the codec's share. A bound of 160
// per byte holds now (about 137).
func TestMemoryPerByte(t *testing.T) {
	body := []byte("<r>" + strings.Repeat("<a/>", (xml.DefaultMaxBodySize-16)/4) + "</r>")
	var v any
	var err error
	n := allocbound.Check(t, len(body), 160, 1<<20, func() { err = xml.New().Decode(body, "application/xml", &v) })
	if err != nil {
		t.Fatal(err)
	}
	t.Logf("%d bytes of empty elements: %d bytes allocated (%d per byte)", len(body), n, n/uint64(len(body)))
}

func TestBounds(t *testing.T) {
	var v any
	deep := func(n int) []byte { return []byte(strings.Repeat("<a>", n) + strings.Repeat("</a>", n)) }
	if err := xml.New().Decode(deep(xml.DefaultMaxDepth), "application/xml", &v); err != nil {
		t.Fatalf("%d deep: %v", xml.DefaultMaxDepth, err)
	}
	err := xml.New().Decode(deep(xml.DefaultMaxDepth+1), "application/xml", &v)
	var de *acemq.DecodeError
	if !errors.As(err, &de) || de.Retryable || !errors.Is(err, acemq.ErrTooDeep) ||
		!strings.Contains(err.Error(), "body nests deeper than the xml codec's limit of 128 levels") {
		t.Fatalf("%d deep: %v", xml.DefaultMaxDepth+1, err)
	}
	big := []byte("<r>" + strings.Repeat("x", xml.DefaultMaxBodySize) + "</r>")
	err = xml.New().Decode(big, "application/xml", &v)
	if !errors.As(err, &de) || de.Retryable || !errors.Is(err, acemq.ErrTooLarge) ||
		!strings.Contains(err.Error(), "body of 1048583 bytes exceeds the xml codec's limit of 1048576") {
		t.Fatalf("over the size bound: %v", err)
	}
	c := xml.New(xml.WithMaxBodySize(len(big)), xml.WithMaxDepth(2))
	if err := c.Decode(big, "application/xml", &v); err != nil {
		t.Fatalf("WithMaxBodySize: %v", err)
	}
	if err := c.Decode(deep(3), "application/xml", &v); !errors.Is(err, acemq.ErrTooDeep) {
		t.Fatalf("WithMaxDepth(2): %v", err)
	}
}

// A bound of zero or less is a mistake, refused at start-up.
func TestNonPositiveBoundPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "xml: New needs positive bounds") {
			t.Errorf("recovered %v", r)
		}
	}()
	xml.New(xml.WithMaxDepth(0))
}
