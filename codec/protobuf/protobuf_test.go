package protobuf_test

import (
	"errors"
	"fmt"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec/protobuf"
	"github.com/acemq/acemq/internal/allocbound"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
	"google.golang.org/protobuf/types/known/timestamppb"
)

func sample(t testing.TB) *structpb.Struct {
	s, err := structpb.NewStruct(map[string]any{"id": "o-1", "qty": 2, "items": []any{"a", "b"}})
	if err != nil {
		t.Fatal(err)
	}
	return s
}

func TestRoundTripIntoEveryTarget(t *testing.T) {
	c := protobuf.New(&structpb.Struct{})
	if c.MessageName() != "google.protobuf.Struct" {
		t.Fatalf("MessageName = %s", c.MessageName())
	}
	in := sample(t)
	body, err := c.Encode(in)
	if err != nil {
		t.Fatal(err)
	}
	var direct structpb.Struct
	var ptr *structpb.Struct
	var msg proto.Message
	var v any
	for name, target := range map[string]any{"*M": &direct, "**M": &ptr, "*proto.Message": &msg, "*any": &v} {
		if err := c.Decode(body, "application/x-protobuf", target); err != nil {
			t.Fatalf("%s: %v", name, err)
		}
	}
	for name, got := range map[string]proto.Message{"*M": &direct, "**M": ptr, "*proto.Message": msg, "*any": v.(proto.Message)} {
		if !proto.Equal(got, in) {
			t.Errorf("%s: %v, want %v", name, got, in)
		}
	}
}

// One message type per codec: another is refused both ways.
func TestOneMessageType(t *testing.T) {
	c := protobuf.New(&structpb.Struct{})
	if _, err := c.Encode(timestamppb.Now()); err == nil {
		t.Error("encoded a Timestamp with a Struct codec")
	}
	if _, err := c.Encode("text"); err == nil {
		t.Error("encoded a string")
	}
	body, _ := c.Encode(sample(t))
	var ts timestamppb.Timestamp
	var s string
	for name, target := range map[string]any{"Timestamp": &ts, "string": &s} {
		err := c.Decode(body, "application/x-protobuf", target)
		var de *acemq.DecodeError
		if !errors.As(err, &de) || de.Retryable {
			t.Errorf("into a %s: %v", name, err)
		}
	}
	var de *acemq.DecodeError
	var m structpb.Struct
	if err := c.Decode([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f}, "application/x-protobuf", &m); !errors.As(err, &de) || de.Retryable {
		t.Errorf("a hostile length: %v", err)
	}
}

func TestContentTypes(t *testing.T) {
	c := protobuf.New(&structpb.Struct{})
	for ct, want := range map[string]bool{
		"application/x-protobuf": true, "application/protobuf": true, "application/vnd.google.protobuf": true,
		"application/vnd.orders+protobuf; proto=orders.Order": true, "": false, "application/octet-stream": false,
	} {
		if c.Accepts(ct) != want {
			t.Errorf("Accepts(%q) = %t", ct, !want)
		}
	}
}

// protobufBytesPerByte bounds what Decode allocates per body byte, and
// protobufBytesFixed what it allocates besides (docs/codecs.md).
const (
	protobufBytesPerByte = 256
	protobufBytesFixed   = 64 << 10
)

// nestedList is a google.protobuf.Value holding a list holding a value …
// depth lists deep, as a Struct field "a".
func nestedList(depth int) []byte {
	var v []byte // an empty Value
	for range depth {
		list := append([]byte{0x0a}, varint(len(v))...) // ListValue.values
		list = append(list, v...)
		v = append([]byte{0x32}, varint(len(list))...) // Value.list_value
		v = append(v, list...)
	}
	entry := append([]byte{0x0a, 0x01, 'a', 0x12}, varint(len(v))...) // key "a", value
	entry = append(entry, v...)
	return append(append([]byte{0x0a}, varint(len(entry))...), entry...) // Struct.fields
}

func varint(n int) []byte {
	var b []byte
	for n >= 0x80 {
		b = append(b, byte(n)|0x80)
		n >>= 7
	}
	return append(b, byte(n))
}

func FuzzDecode(f *testing.F) {
	c := protobuf.New(&structpb.Struct{})
	good, _ := c.Encode(sample(f))
	f.Add(good)
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Add(nestedList(200))
	f.Fuzz(func(t *testing.T, body []byte) {
		var m *structpb.Struct
		var err error
		allocbound.Check(t, len(body), protobufBytesPerByte, protobufBytesFixed, func() { err = c.Decode(body, "application/x-protobuf", &m) })
		if err == nil {
			if _, err := c.Encode(m); err != nil {
				t.Fatalf("decoded but not encodable: %v", err)
			}
		}
	})
}

func TestBounds(t *testing.T) {
	c := protobuf.New(&structpb.Struct{})
	var m *structpb.Struct
	// Struct → Value → (ListValue → Value) per level: two messages a level.
	if err := c.Decode(nestedList(protobuf.DefaultMaxDepth/2-2), "application/x-protobuf", &m); err != nil {
		t.Fatalf("within the depth bound: %v", err)
	}
	err := c.Decode(nestedList(protobuf.DefaultMaxDepth/2+1), "application/x-protobuf", &m)
	var de *acemq.DecodeError
	if !errors.As(err, &de) || de.Retryable || !errors.Is(err, acemq.ErrTooDeep) ||
		!strings.Contains(err.Error(), "body nests deeper than the protobuf codec's limit of 100 levels") {
		t.Fatalf("over the depth bound: %v", err)
	}
	big := make([]byte, protobuf.DefaultMaxBodySize+1)
	err = c.Decode(big, "application/x-protobuf", &m)
	if !errors.As(err, &de) || de.Retryable || !errors.Is(err, acemq.ErrTooLarge) ||
		!strings.Contains(err.Error(), "body of 4194305 bytes exceeds the protobuf codec's limit of 4194304") {
		t.Fatalf("over the size bound: %v", err)
	}
	small := protobuf.New(&structpb.Struct{}, protobuf.WithMaxDepth(4), protobuf.WithMaxBodySize(8))
	if err := small.Decode(nestedList(3), "application/x-protobuf", &m); !errors.Is(err, acemq.ErrTooDeep) && !errors.Is(err, acemq.ErrTooLarge) {
		t.Fatalf("small bounds: %v", err)
	}
	if err := protobuf.New(&structpb.Struct{}, protobuf.WithMaxDepth(4)).Decode(nestedList(3), "application/x-protobuf", &m); !errors.Is(err, acemq.ErrTooDeep) {
		t.Fatalf("WithMaxDepth(4): %v", err)
	}
}

// A bound of zero or less is a mistake, refused at start-up.
func TestNonPositiveBoundPanics(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(fmt.Sprint(r), "protobuf: New needs positive bounds") {
			t.Errorf("recovered %v", r)
		}
	}()
	protobuf.New(&structpb.Struct{}, protobuf.WithMaxDepth(0))
}
