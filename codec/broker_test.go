package codec_test

import (
	"bytes"
	"context"
	"fmt"
	"reflect"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec"
	"github.com/acemq/acemq/codec/avro"
	"github.com/acemq/acemq/codec/encrypted"
	"github.com/acemq/acemq/codec/protobuf"
	"github.com/acemq/acemq/codec/toml"
	"github.com/acemq/acemq/codec/xml"
	"github.com/acemq/acemq/codec/yaml"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"google.golang.org/protobuf/proto"
	"google.golang.org/protobuf/types/known/structpb"
)

// order is tagged for every format that reads tags.
type order struct {
	ID    string   `json:"id" xml:"id" yaml:"id" toml:"id" avro:"id"`
	Qty   int      `json:"qty" xml:"qty" yaml:"qty" toml:"qty" avro:"qty"`
	Items []string `json:"items" xml:"items" yaml:"items" toml:"items" avro:"items"`
}

const orderSchema = `{"type":"record","name":"Order","fields":[{"name":"id","type":"string"},{"name":"qty","type":"int"},{"name":"items","type":{"type":"array","items":"string"}}]}`

var sent = order{ID: "o-1", Qty: 2, Items: []string{"a", "b"}}

func keyring(t testing.TB) *encrypted.Keyring {
	r, err := encrypted.NewKeyring("2026-01", map[string][]byte{"2026-01": bytes.Repeat([]byte{7}, 32)})
	if err != nil {
		t.Fatal(err)
	}
	return r
}

// roundTrip publishes v with c and consumes it with c as a T.
func roundTrip[T any](t *testing.T, conn *acemq.Conn, c acemq.Codec, v T) acemq.Message[T] {
	t.Helper()
	q := brokertest.Queue(t, conn, "codec")
	got := make(chan acemq.Message[T], 1)
	cons, err := acemq.Consume(context.Background(), conn, q, func(_ context.Context, m acemq.Message[T]) acemq.Ack {
		got <- m
		return acemq.Accept()
	}, acemq.WithCodec(c))
	if err != nil {
		t.Fatal(err)
	}
	defer brokertest.Stop(t, cons)
	if _, err := acemq.NewPublisher[T](conn, "", acemq.WithCodec(c)).Send(context.Background(), q, v); err != nil {
		t.Fatal(err)
	}
	m := brokertest.Receive(t, got)
	if m.ContentType != c.ContentType() {
		t.Errorf("content type %q, want %q", m.ContentType, c.ContentType())
	}
	return m
}

// Every codec, plain and encrypted, on both brokers.
func TestEveryCodecRoundTrips(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		conn := brokertest.Connect(t, url)
		reg := avro.NewRegistry(avro.NewMemoryStore())
		registered, err := avro.NewRegistered(context.Background(), reg, orderSchema)
		if err != nil {
			t.Fatal(err)
		}
		fixed, err := avro.NewFixed(orderSchema)
		if err != nil {
			t.Fatal(err)
		}
		byName := func(n string) acemq.Codec {
			c, err := codec.Lookup(n)
			if err != nil {
				t.Fatal(err)
			}
			return c
		}
		structs := map[string]acemq.Codec{
			"json": byName("json"), "xml": xml.New(), "yaml": yaml.New(), "toml": toml.New(),
			"avro registered": registered, "avro fixed": fixed,
		}
		ring := keyring(t)
		for name, c := range structs {
			for _, wrap := range []string{"", "encrypted "} {
				if wrap != "" {
					c = encrypted.Must(c, ring)
				}
				t.Run(wrap+name, func(t *testing.T) {
					m := roundTrip(t, conn, c, sent)
					if !reflect.DeepEqual(m.Payload, sent) {
						t.Errorf("got %+v, want %+v", m.Payload, sent)
					}
					if wrap != "" {
						if id, ok := encrypted.KeyIDOf(m.Body); !ok || id != "2026-01" {
							t.Errorf("the body's key id: %q, %t", id, ok)
						}
					}
				})
			}
		}
		t.Run("text", func(t *testing.T) {
			if m := roundTrip(t, conn, byName("string"), "héllo"); m.Payload != "héllo" {
				t.Errorf("got %q", m.Payload)
			}
		})
		t.Run("bytes", func(t *testing.T) {
			if m := roundTrip(t, conn, byName("bytes"), []byte{0, 0xff}); !bytes.Equal(m.Payload, []byte{0, 0xff}) {
				t.Errorf("got %x", m.Payload)
			}
		})
		t.Run("protobuf", func(t *testing.T) {
			s, _ := structpb.NewStruct(map[string]any{"id": "o-1", "qty": 2})
			for _, c := range []acemq.Codec{protobuf.New(&structpb.Struct{}), encrypted.Must(protobuf.New(&structpb.Struct{}), ring)} {
				if m := roundTrip(t, conn, c, s); !proto.Equal(m.Payload, s) {
					t.Errorf("%s: got %v", c.ContentType(), m.Payload)
				}
			}
		})
	})
}

// A consumer reading by content type (codec.Reading) takes each format
// from one queue; an encrypted body the ring cannot open is parked with
// its key id in the reason, and never reaches the handler.
func TestReadingByContentTypeAndParkingWhatDoesNotOpen(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		conn := brokertest.Connect(t, url)
		q := brokertest.Queue(t, conn, "codec-mixed")
		ring := keyring(t)
		other, _ := encrypted.NewKeyring("2025-06", map[string][]byte{"2025-06": bytes.Repeat([]byte{9}, 32)})
		reader, err := codec.Reading("json", "yaml", "xml", "toml")
		if err != nil {
			t.Fatal(err)
		}
		enc := encrypted.Must(reader, ring)
		got := make(chan acemq.Message[order], 8)
		cons, err := acemq.Consume(context.Background(), conn, q, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
			got <- m
			return acemq.Accept()
		}, acemq.WithCodec(codec.Composite(enc, reader)))
		if err != nil {
			t.Fatal(err)
		}
		defer brokertest.Stop(t, cons)
		for _, c := range []acemq.Codec{acemq.JSON, yaml.New(), xml.New(), toml.New(), encrypted.Must(acemq.JSON, ring), encrypted.Must(acemq.JSON, other)} {
			if _, err := acemq.NewPublisher[order](conn, "", acemq.WithCodec(c)).Send(context.Background(), q, sent); err != nil {
				t.Fatal(err)
			}
		}
		seen := map[string]bool{}
		for range 5 {
			m := brokertest.Receive(t, got)
			if !reflect.DeepEqual(m.Payload, sent) {
				t.Errorf("%s: %+v", m.ContentType, m.Payload)
			}
			seen[m.ContentType] = true
		}
		if len(seen) != 5 {
			t.Errorf("content types read: %v", seen)
		}
		d := brokertest.Get(t, conn, contract.ParkedQueue(q))
		reason := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID).Reason()
		if !strings.Contains(reason, `key id "2025-06", which is not on the keyring`) {
			t.Errorf("parked with %q", reason)
		}
		if id, _ := encrypted.KeyIDOf(d.Body); id != "2025-06" {
			t.Errorf("the parked body's key id %q", id)
		}
	})
}

// Hostile bodies published to a real queue are parked, each with a reason
// that names the bound it broke, and the consumer goes on: the security
// review's 200 KB of nested YAML brackets ended the process before the
// bounds. On both brokers, published raw (not through a codec).
func TestHostileBodiesAreParkedWithTheBound(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		conn := brokertest.Connect(t, url)
		q := brokertest.Queue(t, conn, "codec-hostile")
		reader, err := codec.Reading("json", "yaml", "xml", "toml")
		if err != nil {
			t.Fatal(err)
		}
		got := make(chan acemq.Message[any], 8)
		cons, err := acemq.Consume(context.Background(), conn, q, func(_ context.Context, m acemq.Message[any]) acemq.Ack {
			got <- m
			return acemq.Accept()
		}, acemq.WithCodec(reader))
		if err != nil {
			t.Fatal(err)
		}
		defer brokertest.Stop(t, cons)
		hostile := []struct{ ct, body, reason string }{
			{"application/yaml", strings.Repeat("[", 100000) + strings.Repeat("]", 100000),
				"body nests deeper than the yaml codec's limit of 64 levels"},
			{"application/yaml", strings.Repeat("{a: ", 70) + "1" + strings.Repeat("}", 70),
				"body nests deeper than the yaml codec's limit of 64 levels"},
			{"application/yaml", "a: " + strings.Repeat("x", 300000-3),
				"body of 300000 bytes exceeds the yaml codec's limit of 262144"},
			{"application/json", strings.Repeat("[", 129) + strings.Repeat("]", 129),
				"body nests deeper than the json codec's limit of 128 levels"},
			{"application/xml", strings.Repeat("<a>", 129) + strings.Repeat("</a>", 129),
				"body nests deeper than the xml codec's limit of 128 levels"},
			{"application/toml", "x = " + strings.Repeat("[", 129) + strings.Repeat("]", 129),
				"body nests deeper than the toml codec's limit of 128 levels"},
		}
		for _, h := range hostile {
			if err := brokertest.Publish(context.Background(), conn, brokertest.Outbound{RoutingKey: q, ContentType: h.ct, Body: []byte(h.body)}); err != nil {
				t.Fatal(err)
			}
		}
		if _, err := acemq.NewPublisher[order](conn, "", acemq.WithCodec(yaml.New())).Send(context.Background(), q, sent); err != nil {
			t.Fatal(err)
		}
		if m := brokertest.Receive(t, got); m.ContentType != yaml.ContentType {
			t.Errorf("the handler got %s: %v", m.ContentType, m.Payload)
		}
		// The parked copies, in whatever order the consumer settled them.
		want := map[string]int{}
		for _, h := range hostile {
			want[fmt.Sprintf("%d bytes: could not be decoded: LimitError: %s (content type %s)", len(h.body), h.reason, h.ct)]++
		}
		for range hostile {
			d := brokertest.Get(t, conn, contract.ParkedQueue(q))
			parked := fmt.Sprintf("%d bytes: %s", len(d.Body), acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID).Reason())
			if want[parked] == 0 {
				t.Errorf("parked %q, want one of %v", parked, want)
			}
			want[parked]--
		}
		select {
		case m := <-got:
			t.Errorf("the handler got a hostile body: %s", m.ContentType)
		default:
		}
	})
}
