package protobuf_test

import (
	"errors"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec/protobuf"
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

func FuzzDecode(f *testing.F) {
	c := protobuf.New(&structpb.Struct{})
	good, _ := c.Encode(sample(f))
	f.Add(good)
	f.Add([]byte{0x0a, 0xff, 0xff, 0xff, 0xff, 0x0f})
	f.Fuzz(func(t *testing.T, body []byte) {
		var m *structpb.Struct
		if err := c.Decode(body, "application/x-protobuf", &m); err == nil {
			if _, err := c.Encode(m); err != nil {
				t.Fatalf("decoded but not encodable: %v", err)
			}
		}
	})
}
