package rpc_test

import (
	"context"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/rpc"
)

type benchOrder struct {
	ID       string   `json:"id"`
	Customer string   `json:"customer"`
	Amount   int64    `json:"amount"`
	Currency string   `json:"currency"`
	Items    []string `json:"items"`
	Note     string   `json:"note"`
}

// BenchmarkAsk is one Ask at a time against rpc.Serve on memory://: what
// the requester and the responder cost per call with a broker that costs
// little, allocations included.
func BenchmarkAsk(b *testing.B) {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "memory://bench-ask")
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if err := acemq.NewTopology().Queue("bench.ask").Apply(ctx, c); err != nil {
		b.Fatal(err)
	}
	resp, err := rpc.Serve(ctx, c, "bench.ask", func(_ context.Context, m acemq.Message[benchOrder]) (benchOrder, error) {
		return m.Payload, nil
	})
	if err != nil {
		b.Fatal(err)
	}
	defer resp.Close(ctx)
	req, err := rpc.Open[benchOrder, benchOrder](ctx, c, "", "bench.ask", rpc.WithTimeout(10*time.Second))
	if err != nil {
		b.Fatal(err)
	}
	defer req.Close(ctx)
	o := benchOrder{ID: "o-1", Customer: "c-1", Amount: 1999, Currency: "EUR", Items: []string{"a", "b"}, Note: "bench"}
	b.ReportAllocs()
	b.ResetTimer()
	for range b.N {
		if _, err := req.Ask(ctx, o); err != nil {
			b.Fatal(err)
		}
	}
}
