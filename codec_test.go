package acemq_test

import (
	"encoding/json"
	"errors"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
)

type codecOrder struct {
	ID       string   `json:"id"`
	Amount   int      `json:"amount"`
	Tags     []string `json:"tags,omitempty"`
	Note     string   `json:"note,omitempty"`
	internal int
}

func wantDecodeError(t *testing.T, err error, retryable bool) *acemq.DecodeError {
	t.Helper()
	var de *acemq.DecodeError
	if !errors.As(err, &de) {
		t.Fatalf("error %v (%T) is not a *DecodeError", err, err)
	}
	if de.Retryable != retryable {
		t.Errorf("Retryable = %v, want %v", de.Retryable, retryable)
	}
	if de.Error() == "" || de.Unwrap() == nil {
		t.Errorf("a DecodeError without a cause: %#v", de)
	}
	return de
}

func TestJSONCodecAccepts(t *testing.T) {
	for ct, want := range map[string]bool{
		"":                                   true,
		"  ":                                 true,
		"application/json":                   true,
		"application/json; charset=utf-8":    true,
		"Application/JSON; Charset=UTF-8":    true,
		"application/cloudevents+json":       true,
		"application/problem+json":           true,
		"application/vnd.acme.order.v2+json": true,
		"text/json":                          true,
		"text/plain":                         false,
		"text/plain; charset=utf-8":          false,
		"application/octet-stream":           false,
		"application/xml":                    false,
		"application/yaml":                   false,
		"application/jsonl":                  false,
		"application/json-patch":             false,
		"image/svg+xml":                      false,
		"application/vnd.acemq.encrypted":    false,
	} {
		if got := acemq.JSON.Accepts(ct); got != want {
			t.Errorf("JSON.Accepts(%q) = %v, want %v", ct, got, want)
		}
	}
	if got := acemq.JSON.ContentType(); got != "application/json" {
		t.Errorf("JSON writes %q", got)
	}
}

// TestOnlyJSONAnswersAnEmptyContentType: of the format codecs, only JSON
// claims a body without a content type.
func TestOnlyJSONAnswersAnEmptyContentType(t *testing.T) {
	if !acemq.JSON.Accepts("") {
		t.Error("JSON does not answer an empty content type")
	}
	if acemq.Text.Accepts("") {
		t.Error("Text answers an empty content type")
	}
	c := codec.Composite(acemq.Text, acemq.JSON)
	var v any
	if err := c.Decode([]byte(`{"a":1}`), "", &v); err != nil {
		t.Fatal(err)
	}
	if m, ok := v.(map[string]any); !ok || m["a"] != 1.0 {
		t.Errorf("a composite read an untyped body as %#v, not as JSON", v)
	}
}

func TestJSONCodecRoundTrip(t *testing.T) {
	in := codecOrder{ID: "o-1", Amount: 42, Tags: []string{"<b>&</b>"}, internal: 7}
	b, err := acemq.JSON.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	if want := `{"id":"o-1","amount":42,"tags":["<b>&</b>"]}`; string(b) != want {
		t.Errorf("Encode = %s, want %s (no HTML escaping, no trailing newline)", b, want)
	}
	var out codecOrder
	if err := acemq.JSON.Decode(b, "application/json", &out); err != nil {
		t.Fatal(err)
	}
	if out.ID != in.ID || out.Amount != in.Amount || len(out.Tags) != 1 || out.Tags[0] != in.Tags[0] {
		t.Errorf("round trip gave %+v", out)
	}
	// A string payload is a JSON string literal.
	if b, _ := acemq.JSON.Encode("hi \"there\""); string(b) != `"hi \"there\""` {
		t.Errorf("Encode(string) = %s", b)
	}
}

func TestJSONCodecRawMessage(t *testing.T) {
	raw := json.RawMessage(`{ "kept" : "as is" }`)
	b, err := acemq.JSON.Encode(raw)
	if err != nil || string(b) != string(raw) {
		t.Errorf("Encode(RawMessage) = %q, %v; want the bytes unchanged", b, err)
	}
	if _, err := acemq.JSON.Encode(json.RawMessage(`{"broken"`)); err == nil {
		t.Error("Encode of an invalid RawMessage succeeded")
	}
}

func TestJSONCodecErrors(t *testing.T) {
	var out codecOrder
	for _, body := range []string{`{"id":`, ``, `not json`, `{"amount":"many"}`} {
		err := acemq.JSON.Decode([]byte(body), "application/json", &out)
		de := wantDecodeError(t, err, false)
		if de.ContentType != "application/json" {
			t.Errorf("ContentType = %q", de.ContentType)
		}
	}
	if _, err := acemq.JSON.Encode(make(chan int)); err == nil || !strings.Contains(err.Error(), "chan int") {
		t.Errorf("Encode(chan) = %v, want an error naming the type", err)
	}
}

func TestTextCodec(t *testing.T) {
	if got := acemq.Text.ContentType(); got != "text/plain; charset=utf-8" {
		t.Errorf("Text writes %q", got)
	}
	for ct, want := range map[string]bool{
		"text/plain": true, "text/plain; charset=utf-8": true, "TEXT/CSV": true, "text/json": true,
		"": false, "application/json": false, "application/octet-stream": false, "textual/plain": false,
	} {
		if got := acemq.Text.Accepts(ct); got != want {
			t.Errorf("Text.Accepts(%q) = %v, want %v", ct, got, want)
		}
	}
	type label string
	for _, v := range []any{"héllo", []byte("héllo"), label("héllo")} {
		b, err := acemq.Text.Encode(v)
		if err != nil || string(b) != "héllo" {
			t.Errorf("Encode(%T) = %q, %v", v, b, err)
		}
	}
	if _, err := acemq.Text.Encode(42); err == nil {
		t.Error("Text encoded an int")
	}
	var s string
	if err := acemq.Text.Decode([]byte("héllo"), "text/plain", &s); err != nil || s != "héllo" {
		t.Errorf("Decode = %q, %v", s, err)
	}
	var l label
	if err := acemq.Text.Decode([]byte("x"), "text/plain", &l); err != nil || l != "x" {
		t.Errorf("Decode into a named string = %q, %v", l, err)
	}
	var n int
	wantDecodeError(t, acemq.Text.Decode([]byte("1"), "text/plain", &n), false)
}

// TestTextCodecRefusesInvalidUTF8 both ways.
func TestTextCodecRefusesInvalidUTF8(t *testing.T) {
	bad := []byte{'o', 'k', 0xff, 0xfe}
	if _, err := acemq.Text.Encode(string(bad)); err == nil {
		t.Error("Encode accepted an invalid UTF-8 string")
	}
	if _, err := acemq.Text.Encode(bad); err == nil {
		t.Error("Encode accepted invalid UTF-8 bytes")
	}
	var s string
	wantDecodeError(t, acemq.Text.Decode(bad, "text/plain; charset=utf-8", &s), false)
	if s != "" {
		t.Errorf("a refused decode set %q", s)
	}
	var b []byte
	wantDecodeError(t, acemq.Text.Decode(bad, "text/plain", &b), false)
}

func TestBytesCodec(t *testing.T) {
	if got := acemq.Bytes.ContentType(); got != "application/octet-stream" {
		t.Errorf("Bytes writes %q", got)
	}
	for _, ct := range []string{"application/octet-stream", "application/json", "image/png", "", "garbage;;"} {
		if !acemq.Bytes.Accepts(ct) {
			t.Errorf("Bytes does not read %q", ct)
		}
	}
	body := []byte{0, 1, 0xff}
	b, err := acemq.Bytes.Encode(body)
	if err != nil || string(b) != string(body) {
		t.Errorf("Encode = %v, %v", b, err)
	}
	if b, err := acemq.Bytes.Encode("str"); err != nil || string(b) != "str" {
		t.Errorf("Encode(string) = %q, %v", b, err)
	}
	if _, err := acemq.Bytes.Encode(3); err == nil {
		t.Error("Bytes encoded an int")
	}
	var out []byte
	if err := acemq.Bytes.Decode(body, "image/png", &out); err != nil {
		t.Fatal(err)
	}
	body[0] = 9
	if out[0] != 0 {
		t.Error("Decode shares the body's storage")
	}
	var s string
	if err := acemq.Bytes.Decode([]byte("x"), "", &s); err != nil || s != "x" {
		t.Errorf("Decode into *string = %q, %v", s, err)
	}
	var n int
	wantDecodeError(t, acemq.Bytes.Decode(body, "", &n), false)
}

func TestCompositeDispatch(t *testing.T) {
	c := codec.Composite(acemq.JSON, acemq.Text, acemq.Bytes)
	if c.ContentType() != "application/json" {
		t.Errorf("a composite writes %q, want its first codec's", c.ContentType())
	}
	if b, _ := c.Encode("x"); string(b) != `"x"` {
		t.Errorf("a composite encodes with %q, want its first codec (JSON)", b)
	}
	for _, tc := range []struct {
		ct, body string
		want     any
	}{
		{"", `"json"`, "json"},
		{"application/json", `"json"`, "json"},
		{"application/cloudevents+json; charset=utf-8", `"json"`, "json"},
		{"text/plain; charset=utf-8", `"quoted text"`, `"quoted text"`},
		{"application/octet-stream", `raw`, []byte("raw")},
		{"image/png", `png`, []byte("png")},
	} {
		var v any
		if err := c.Decode([]byte(tc.body), tc.ct, &v); err != nil {
			t.Errorf("Decode(%q): %v", tc.ct, err)
			continue
		}
		if !sameValue(v, tc.want) {
			t.Errorf("Decode(%q) = %#v (%T), want %#v", tc.ct, v, v, tc.want)
		}
	}
	// A content type nobody reads.
	strict := codec.Composite(acemq.JSON, acemq.Text)
	if strict.Accepts("application/xml") {
		t.Error("JSON+Text accepts application/xml")
	}
	var v any
	de := wantDecodeError(t, strict.Decode([]byte("<a/>"), "application/xml", &v), false)
	if !strings.Contains(de.Error(), "application/xml") {
		t.Errorf("the error does not name the content type: %v", de)
	}
	// A failure inside the chosen codec is that codec's.
	wantDecodeError(t, c.Decode([]byte("{"), "application/json", &v), false)
	defer func() {
		if recover() == nil {
			t.Error("Composite() with no codecs did not panic")
		}
	}()
	codec.Composite()
}

func TestDecodeErrorMessage(t *testing.T) {
	e := &acemq.DecodeError{Err: errors.New("boom")}
	if !strings.Contains(e.Error(), "no content type") || !strings.Contains(e.Error(), "boom") {
		t.Errorf("Error() = %q", e.Error())
	}
	e = &acemq.DecodeError{ContentType: "application/x", Retryable: true, Err: errors.New("store down")}
	if !strings.Contains(e.Error(), "application/x") || !errors.Is(e, e.Err) {
		t.Errorf("Error() = %q", e.Error())
	}
}
