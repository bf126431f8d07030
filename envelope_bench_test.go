package acemq_test

import (
	"testing"
	"time"

	"github.com/acemq/acemq"
)

// benchEnvelope is a fully populated envelope: every field set, three
// application headers of the usual kinds (a string, an integer and W3C
// trace context).
func benchEnvelope(b *testing.B) acemq.Envelope {
	b.Helper()
	e, err := acemq.NewEnvelope(acemq.Fields{
		ID:            "11111111-2222-3333-4444-555555555555",
		Type:          "order.placed",
		Version:       3,
		CorrelationID: "corr-1",
		CausationID:   "cause-1",
		Attempt:       2,
		FirstSeen:     time.UnixMilli(1767323045678),
		Origin:        "orders@host-7",
		Reason:        "the handler rejected it: boom",
		Claim:         "s3://payloads/orders/o-4",
		Route:         []string{"validate", "ship", "bill"},
		RoutePosition: 1,
		RouteID:       "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee",
		Headers: map[string]any{
			"x-tenant":    "acme",
			"x-priority":  int32(5),
			"traceparent": "00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01",
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	return e
}

// BenchmarkAppendHeaders writes a fully populated envelope into a new map,
// as every publish does.
func BenchmarkAppendHeaders(b *testing.B) {
	e := benchEnvelope(b)
	b.ReportAllocs()
	for b.Loop() {
		if h := e.AppendHeaders(nil, "orders.new"); len(h) != 16 {
			b.Fatalf("%d headers", len(h))
		}
	}
}

// BenchmarkAppendHeadersReuse writes into a map the caller clears and
// reuses: the cost of the header values alone.
func BenchmarkAppendHeadersReuse(b *testing.B) {
	e := benchEnvelope(b)
	dst := make(map[string]any, 16)
	b.ReportAllocs()
	for b.Loop() {
		clear(dst)
		e.AppendHeaders(dst, "orders.new")
	}
}

// BenchmarkReadEnvelope reads a fully populated envelope from headers as a
// delivery carries them, as every delivery does.
func BenchmarkReadEnvelope(b *testing.B) {
	h := benchEnvelope(b).AppendHeaders(nil, "orders.new")
	b.ReportAllocs()
	for b.Loop() {
		if e := acemq.ReadEnvelope(h, "orders.new", "11111111-2222-3333-4444-555555555555"); e.Attempt() != 2 {
			b.Fatal("bad read")
		}
	}
}

// BenchmarkReadEnvelopeBytes reads the same envelope with every string
// header sent as []byte, as some clients do.
func BenchmarkReadEnvelopeBytes(b *testing.B) {
	h := benchEnvelope(b).AppendHeaders(nil, "orders.new")
	for k, v := range h {
		if s, ok := v.(string); ok {
			h[k] = []byte(s)
		}
	}
	b.ReportAllocs()
	for b.Loop() {
		acemq.ReadEnvelope(h, "orders.new", "")
	}
}

// BenchmarkNewEnvelope builds an envelope with defaults and one header.
func BenchmarkNewEnvelope(b *testing.B) {
	f := acemq.Fields{Type: "order.placed", Headers: map[string]any{"x-tenant": "acme"}}
	b.ReportAllocs()
	for b.Loop() {
		if _, err := acemq.NewEnvelope(f); err != nil {
			b.Fatal(err)
		}
	}
}
