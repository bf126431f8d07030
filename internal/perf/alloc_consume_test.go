package perf

import (
	"context"
	"encoding/json"
	"runtime"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
)

// maxEngineAllocsPerDelivery is what the consume engine allocates for one
// delivery of a full envelope (FullEnvelope: two application headers)
// that its handler accepts, beyond what decoding the body costs (raw
// amqp091 decoding the same body pays that too): the envelope's
// application-header list (1; as a map it took 2, the map and its first
// group) and the handler's payload variable (1: it is passed to the codec
// as an interface). The delivery and the envelope themselves stay on the
// worker's stack; before they did not (each was moved to the heap, two
// more allocations and about 430 bytes a message).
const maxEngineAllocsPerDelivery = 2

// TestConsumeEngineAllocationBound counts the allocations of the consume
// engine per delivery on the null driver (no network, no amqp091), at
// concurrency 1 and 8, and holds them to maxEngineAllocsPerDelivery
// beyond decoding the body.
func TestConsumeEngineAllocationBound(t *testing.T) {
	if raceDetector {
		t.Skip("allocation counts are not exact under -race")
	}
	var probe Order
	decode := testing.AllocsPerRun(200, func() {
		probe = Order{}
		if err := json.Unmarshal(orderJSONBody, &probe); err != nil {
			t.Fatal(err)
		}
	})
	for _, conc := range []int{1, 8} {
		got := engineAllocsPerDelivery(t, conc, 100000)
		t.Logf("concurrency %d: %.2f allocations a delivery, %.0f of them decoding the body", conc, got, decode)
		if own := got - decode; own > maxEngineAllocsPerDelivery+0.5 {
			t.Errorf("concurrency %d: the engine allocates %.2f times a delivery beyond decoding (%.0f), want at most %d", conc, own, decode, maxEngineAllocsPerDelivery)
		}
	}
}

// engineAllocsPerDelivery consumes n deliveries on the null driver and
// returns the mean heap allocations of the process per delivery (the
// consumer's start, a few hundred allocations, is spread over n).
func engineAllocsPerDelivery(t *testing.T, conc, n int) float64 {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "perfnull://allocs")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	nc := brokertest.DriverAs[*nullConn](c)
	nc.delivery = driver.Delivery{
		RoutingKey: "orders", ContentType: "application/json", MessageID: "m-1",
		Persistent: true, Headers: NewFullEnvelope().AppendHeaders(nil, "orders"),
		Body: orderJSONBody, ConsumerTag: "allocs", DeliveryTag: 1,
	}
	var left atomic.Int64
	left.Store(int64(n))
	done := make(chan struct{})
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	cons, err := acemq.Consume(ctx, c, "orders", func(_ context.Context, m acemq.Message[Order]) acemq.Ack {
		if left.Add(-1) == 0 {
			close(done)
		}
		return acemq.Accept()
	}, acemq.WithConcurrency(conc), acemq.WithDeclarations(false))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the consumer stalled")
	}
	runtime.ReadMemStats(&after)
	if err := cons.Close(ctx); err != nil {
		t.Fatal(err)
	}
	return float64(after.Mallocs-before.Mallocs) / float64(n)
}
