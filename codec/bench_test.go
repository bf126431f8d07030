package codec_test

import (
	"context"
	"fmt"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec/avro"
	"github.com/acemq/acemq/codec/encrypted"
	"github.com/acemq/acemq/codec/protobuf"
	"github.com/acemq/acemq/codec/toml"
	"github.com/acemq/acemq/codec/xml"
	"github.com/acemq/acemq/codec/yaml"
	"google.golang.org/protobuf/types/known/structpb"
)

// benchOrder is an order whose JSON encoding is about size bytes: a few
// fields and a list of 16-character items.
func benchOrder(size int) order {
	o := order{ID: "o-0000000001", Qty: 3}
	for n := 40; n < size; n += 19 { // "aaaaaaaaaaaaaaaa", is 19 bytes
		o.Items = append(o.Items, strings.Repeat(string(rune('a'+len(o.Items)%26)), 16))
	}
	return o
}

// BenchmarkCodecs encodes and decodes one payload per op with each codec,
// for a 256-byte and a 64 KiB order (sizes of the JSON encoding).
// docs/performance.md reads them as ratios to JSON.
func BenchmarkCodecs(b *testing.B) {
	ring := keyring(b)
	registered, err := avro.NewRegistered(context.Background(), avro.NewRegistry(avro.NewMemoryStore()), orderSchema)
	if err != nil {
		b.Fatal(err)
	}
	fixed, _ := avro.NewFixed(orderSchema)
	codecs := []struct {
		name string
		c    acemq.Codec
	}{
		{"json", acemq.JSON},
		{"encrypted-json", encrypted.Must(acemq.JSON, ring)},
		{"xml", xml.New()},
		{"yaml", yaml.New()},
		{"toml", toml.New()},
		{"avro-registered", registered},
		{"avro-fixed", fixed},
		{"encrypted-avro", encrypted.Must(registered, ring)},
	}
	for _, size := range []int{256, 64 << 10} {
		o := benchOrder(size)
		for _, tc := range codecs {
			b.Run(fmt.Sprintf("%s/%d", tc.name, size), func(b *testing.B) {
				body, err := tc.c.Encode(o)
				if err != nil {
					b.Fatal(err)
				}
				b.SetBytes(int64(len(body)))
				b.ReportAllocs()
				for b.Loop() {
					body, err := tc.c.Encode(o)
					if err != nil {
						b.Fatal(err)
					}
					var back order
					if err := tc.c.Decode(body, tc.c.ContentType(), &back); err != nil {
						b.Fatal(err)
					}
				}
			})
		}
		// Protobuf through google.protobuf.Struct (no generated type in this
		// module): a dynamic message, slower than generated code would be.
		b.Run(fmt.Sprintf("protobuf-struct/%d", size), func(b *testing.B) {
			items := make([]any, len(o.Items))
			for i, s := range o.Items {
				items[i] = s
			}
			s, _ := structpb.NewStruct(map[string]any{"id": o.ID, "qty": o.Qty, "items": items})
			c := protobuf.New(&structpb.Struct{})
			body, _ := c.Encode(s)
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				body, err := c.Encode(s)
				if err != nil {
					b.Fatal(err)
				}
				var back *structpb.Struct
				if err := c.Decode(body, protobuf.ContentType, &back); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkEncryption is the cost of sealing and opening alone, on bodies
// of 256 bytes and 64 KiB.
func BenchmarkEncryption(b *testing.B) {
	c := encrypted.Must(acemq.Bytes, keyring(b))
	for _, size := range []int{256, 64 << 10} {
		plain := make([]byte, size)
		b.Run(fmt.Sprint(size), func(b *testing.B) {
			b.SetBytes(int64(size))
			b.ReportAllocs()
			for b.Loop() {
				body, err := c.Seal(plain)
				if err != nil {
					b.Fatal(err)
				}
				if _, err := c.Open(body); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func TestBenchOrderSizes(t *testing.T) {
	for _, size := range []int{256, 64 << 10} {
		b, _ := acemq.JSON.Encode(benchOrder(size))
		if len(b) < size*9/10 || len(b) > size*11/10 {
			t.Errorf("the %d-byte order encodes to %d bytes of JSON", size, len(b))
		}
	}
}
