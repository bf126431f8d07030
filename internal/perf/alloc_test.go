package perf

import (
	"context"
	"testing"
	"time"

	"github.com/acemq/acemq"
)

// The allocation bounds of the envelope's header writer and reader for a
// fully populated envelope (every field set, a three-step route, two
// application headers: 15 headers in all). docs/performance.md documents
// them; a change that allocates more fails here and must update both.
const (
	// AppendHeaders into a nil map: 4 for the map, sized for its 15
	// entries; 9 for the string values boxed into interfaces (id, type,
	// correlation, causation, origin, error, claim, route, route id); 1
	// for joining the route; 1 for the boxed int64 first-seen.
	// Application header values are shared, not copied (scalars are
	// immutable), and int32 counters below 256 box without allocating.
	maxAllocsAppendHeaders = 15
	// AppendHeaders into a map reused from an earlier message (cleared):
	// the 11 values only.
	maxAllocsAppendHeadersReuse = 11
	// ReadEnvelope: the application-header list (1; a map, before, took
	// 2: the map and its first group) and the route's step slice (1).
	maxAllocsReadEnvelope = 2
)

// fullyPopulated is an envelope with every field set.
func fullyPopulated(tb testing.TB) acemq.Envelope {
	tb.Helper()
	env, err := acemq.NewEnvelope(acemq.Fields{
		Type:          "order.created",
		Version:       2,
		CorrelationID: "corr-3b2f6c1d-8e4a-4f7b-9c0d-1a2b3c4d5e6f",
		CausationID:   "cause-9d8c7b6a-5f4e-4d3c-2b1a-0f9e8d7c6b5a",
		Attempt:       3,
		FirstSeen:     time.UnixMilli(1_760_000_000_000),
		Origin:        "perf@bench",
		Reason:        "the handler rejected it: Error: out of stock",
		Claim:         "s3://bucket/claims/7f3c9a12",
		Route:         []string{"validate", "price", "ship"},
		RoutePosition: 1,
		RouteID:       "run-5b1e4c8d",
		Headers:       map[string]any{"tenant": "acme", "priority": int32(5)},
	})
	if err != nil {
		tb.Fatal(err)
	}
	return env
}

func TestEnvelopeAllocationBounds(t *testing.T) {
	env := fullyPopulated(t)
	headers := env.AppendHeaders(nil, "orders")
	if len(headers) != 15 {
		t.Fatalf("a fully populated envelope wrote %d headers, want 15: %v", len(headers), headers)
	}
	check := func(name string, bound int, f func()) {
		t.Helper()
		got := testing.AllocsPerRun(200, f)
		t.Logf("%s: %.0f allocations (bound %d)", name, got, bound)
		if got > float64(bound) {
			t.Errorf("%s allocates %.0f times per call, above the documented bound of %d (docs/performance.md)", name, got, bound)
		}
	}
	check("AppendHeaders(nil)", maxAllocsAppendHeaders, func() {
		sink = env.AppendHeaders(nil, "orders")
	})
	reuse := make(map[string]any, 16)
	check("AppendHeaders(reused map)", maxAllocsAppendHeadersReuse, func() {
		clear(reuse)
		sink = env.AppendHeaders(reuse, "orders")
	})
	check("ReadEnvelope", maxAllocsReadEnvelope, func() {
		envSink = acemq.ReadEnvelope(headers, "orders", "")
	})
}

var (
	sink    map[string]any
	envSink acemq.Envelope
)

// TestSendOptionsDoNotAllocate: giving Send an envelope costs no
// allocation of its own: the option stays off the heap (it is applied
// without a call through its interface).
func TestSendOptionsDoNotAllocate(t *testing.T) {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "perfnull://allocs")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	p := acemq.NewPublisher[Order](c, "")
	order := NewOrderCached()
	env := fullyPopulated(t)
	plain := testing.AllocsPerRun(200, func() {
		if _, err := p.Send(ctx, "orders", order); err != nil {
			t.Fatal(err)
		}
	})
	given := testing.AllocsPerRun(200, func() {
		if _, err := p.Send(ctx, "orders", order, acemq.WithEnvelope(env)); err != nil {
			t.Fatal(err)
		}
	})
	// The given envelope writes more headers than a fresh one (a route,
	// two application headers, six more strings), each boxed: that is
	// AppendHeaders' cost, measured above; the option itself adds none.
	fresh := testing.AllocsPerRun(200, func() { sink = acemq.MustEnvelope(acemq.Fields{}).AppendHeaders(nil, "orders") })
	full := testing.AllocsPerRun(200, func() { sink = env.AppendHeaders(nil, "orders") })
	t.Logf("Send: %.0f allocations, with WithEnvelope: %.0f", plain, given)
	if extra := (given - full) - (plain - fresh); extra > 0 {
		t.Errorf("WithEnvelope costs %.0f allocations of its own per Send", extra)
	}
	if plain > maxAllocsSend && !raceDetector { // -race moves more to the heap
		t.Errorf("Send with a fresh envelope allocates %.0f times, above the documented bound of %d (docs/performance.md)", plain, maxAllocsSend)
	}
}

// maxAllocsSend is what Send of a fresh envelope allocates on the null
// driver: the body (1) and the payload passed to the codec (1), the id (a
// UUID: 2), the header table (3: the map and its groups; the id and the
// first-seen time boxed, 2; type and origin are a publisher's kept boxes).
// The send's configuration, its envelope and the driver message stay on
// the stack; before they did not (three more allocations, about 460 B).
const maxAllocsSend = 9
