package perf

import (
	"context"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/rpc"
	"github.com/acemq/acemq/topology"
)

// BenchmarkAsk is one Requester.Ask at a time against rpc.Serve on
// memory://, each carrying the 256-byte JSON Order and answered with it:
// what the requester and the responder cost per call, allocations
// included, with a broker that costs little. It has no raw side (raw
// amqp091-go needs a broker); BenchmarkRPC compares the two on RabbitMQ.
func BenchmarkAsk(b *testing.B) {
	ctx := ctxFor(b, time.Minute)
	url := "memory://perf-ask"
	b.Cleanup(func() { memory.Reset(url) })
	c, err := acemq.Connect(ctx, url)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close(context.Background()) })
	if err := topology.New().Queue("perf.ask").Apply(ctx, c); err != nil {
		b.Fatal(err)
	}
	resp, err := rpc.Serve(ctx, c, "perf.ask", func(_ context.Context, m acemq.Message[Order]) (Order, error) {
		return m.Payload, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = resp.Close(context.Background()) })
	req, err := rpc.Open[Order, Order](ctx, c, "", "perf.ask", rpc.WithTimeout(10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = req.Close(context.Background()) })
	o := NewOrderCached()
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := req.Ask(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
}
