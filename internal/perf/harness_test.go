package perf

import (
	"context"
	"reflect"
	"slices"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/wire"
	amqp "github.com/rabbitmq/amqp091-go"
)

func TestPercentileIsNearestRank(t *testing.T) {
	ms := func(ns ...int) []time.Duration {
		out := make([]time.Duration, len(ns))
		for i, n := range ns {
			out[i] = time.Duration(n) * time.Millisecond
		}
		return out
	}
	d := ms(1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16, 17, 18, 19, 20)
	for _, tc := range []struct {
		p    float64
		want int
	}{{0, 1}, {0.05, 1}, {0.06, 2}, {0.5, 10}, {0.95, 19}, {0.99, 20}, {1, 20}} {
		if got := Percentile(d, tc.p); got != time.Duration(tc.want)*time.Millisecond {
			t.Errorf("p%v of 1..20 ms = %v, want %d ms", tc.p*100, got, tc.want)
		}
	}
	// ⌈0.95 × 12⌉ = 12: the 12th value, where rounding would give the 11th.
	if got := Percentile(d[:12], 0.95); got != 12*time.Millisecond {
		t.Errorf("p95 of 1..12 ms = %v, want 12 ms", got)
	}
	if Percentile(nil, 0.5) != 0 {
		t.Error("the percentile of nothing is not 0")
	}
}

func TestLatenciesSummary(t *testing.T) {
	var l Latencies
	if s := l.Summary(); s.Count != 0 || s.Max != 0 || !s.Last.IsZero() {
		t.Errorf("empty summary %+v", s)
	}
	base := time.Unix(1000, 0)
	for i := 100; i >= 1; i-- {
		l.Add(time.Duration(i)*time.Millisecond, base.Add(time.Duration(i)*time.Second))
	}
	s := l.Summary()
	if s.Count != 100 || s.P50 != 50*time.Millisecond || s.P95 != 95*time.Millisecond || s.P99 != 99*time.Millisecond || s.Max != 100*time.Millisecond {
		t.Errorf("summary %+v", s)
	}
	if !s.First.Equal(base.Add(time.Second)) || !s.Last.Equal(base.Add(100*time.Second)) {
		t.Errorf("first %v last %v", s.First, s.Last)
	}
	if r := Rate(100, 2*time.Second); r != 50 {
		t.Errorf("rate %v", r)
	}
	if Rate(1, 0) != 0 || Rate(1, -time.Second) != 0 {
		t.Error("a rate over no time is not 0")
	}
}

func TestStampAndShares(t *testing.T) {
	before := time.Now()
	b := Stamp(64)
	sent, ok := SentAt(b)
	if len(b) != 64 || !ok || sent.Before(before.Add(-time.Millisecond)) || sent.After(time.Now()) {
		t.Errorf("Stamp(64): %d bytes, sent %v (ok %v)", len(b), sent, ok)
	}
	if len(Stamp(1)) != StampSize {
		t.Error("a stamp shorter than the send time")
	}
	if _, ok := SentAt(make([]byte, StampSize-1)); ok {
		t.Error("a short body has a send time")
	}
	if got := Shares(10, 3); !slices.Equal(got, []int{4, 3, 3}) {
		t.Errorf("Shares(10, 3) = %v", got)
	}
}

func TestCountdown(t *testing.T) {
	c := NewCountdown(2)
	c.Tick()
	select {
	case <-c.Done():
		t.Fatal("done after 1 of 2")
	default:
	}
	if c.Wait(context.Background(), 50*time.Millisecond) {
		t.Error("Wait returned true without the last tick")
	}
	c.Tick()
	c.Tick() // more ticks than expected do not panic
	if !c.Wait(context.Background(), time.Second) || c.Left() != 0 {
		t.Errorf("not done after 2 of 2 (left %d)", c.Left())
	}
	if !NewCountdown(0).Wait(context.Background(), time.Second) {
		t.Error("a countdown from 0 is not done")
	}
}

// TestEnvelopeTableIsAcemqs: the headers a raw reference writes by hand are
// the ones acemq writes for the same envelope: the same names, the same Go
// types, the same values (but the first-seen time, which is now).
func TestEnvelopeTableIsAcemqs(t *testing.T) {
	const id = "6f1c2a3b-0000-4000-8000-000000000001"
	for _, tc := range []struct {
		name  string
		raw   *EnvelopeTable
		acemq acemq.Fields
	}{
		{"full", FullEnvelope.Prepare(), acemq.Fields{
			ID: id, Type: FullEnvelope.Type, Version: int(FullEnvelope.Version), CorrelationID: FullEnvelope.Correlation,
			CausationID: FullEnvelope.Causation, Origin: FullEnvelope.Origin, Headers: map[string]any(FullEnvelope.Headers),
		}},
		{"fresh", Envelope{Origin: "acemq@host"}.Prepare(), acemq.Fields{ID: id, Origin: "acemq@host"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			got := tc.raw.For(id, "orders.new")
			want := acemq.MustEnvelope(tc.acemq).AppendHeaders(nil, "orders.new")
			for _, h := range []amqp.Table{got, amqp.Table(want)} {
				if _, ok := h[wire.HeaderFirstSeen].(int64); !ok {
					t.Fatalf("first-seen is a %T", h[wire.HeaderFirstSeen])
				}
				delete(h, wire.HeaderFirstSeen)
			}
			if !reflect.DeepEqual(got, amqp.Table(want)) {
				t.Errorf("raw writes\n %#v\nacemq writes\n %#v", got, want)
			}
		})
	}
	// A request carries its id as its correlation; a reply its request's
	// correlation and, as causation, its request's id.
	tab := Envelope{Origin: "o"}.Prepare()
	req := tab.write("req-1", "pricing", nil, nil)
	rep := tab.write("rep-1", "acemq-reply-x", req[wire.HeaderCorrelation], req[wire.HeaderID])
	if req[wire.HeaderCorrelation] != "req-1" || rep[wire.HeaderCorrelation] != "req-1" || rep[wire.HeaderCausation] != "req-1" || rep[wire.HeaderType] != "acemq-reply-x" {
		t.Errorf("request %v, reply %v", req, rep)
	}
	m := RawMessage(7, "q", "application/json", []byte("{}"), nil)
	if m.MessageId != "7" || m.Headers != nil || m.DeliveryMode != amqp.Persistent {
		t.Errorf("plain raw message %+v", m)
	}
	m = RawMessage(7, "q", "application/json", []byte("{}"), tab)
	if len(m.MessageId) != 36 || m.Headers[wire.HeaderID] != m.MessageId || m.Headers[wire.HeaderType] != "q" {
		t.Errorf("rawhdr message %+v", m)
	}
}
