// Package perf holds the performance suite: benchmarks that run the same
// work through plain amqp091-go and through acemq in the same process
// against the same RabbitMQ (BenchmarkPublish, BenchmarkConsume,
// BenchmarkRPC, with BenchmarkHeaderCost and BenchmarkEngine to explain
// the differences), a test that guards the envelope's allocation counts,
// and tests that traffic leaves the heap where it started (5,000 messages,
// 100,000 with ACEMQ_PERF_FULL=1) and that an idle connection keeps no
// goroutine busy.
//
// Nothing here is imported by the library. The benchmarks need a broker
// (ACEMQ_TEST_AMQP_URL) and run only with -bench; scripts/perf-compare
// runs them several times and prints one table of ratios, and
// docs/performance.md explains the numbers.
package perf

import (
	"encoding/json"
	"strings"
)

// BodySize is the size of the JSON payload every benchmark sends.
const BodySize = 256

// Order is the payload of the benchmarks: a small JSON document whose
// encoding is BodySize bytes.
type Order struct {
	ID       string   `json:"id"`
	Customer string   `json:"customer"`
	Amount   int64    `json:"amount"`
	Currency string   `json:"currency"`
	Items    []string `json:"items"`
	Note     string   `json:"note"`
}

// NewOrder returns the benchmark payload: an Order that encodes to exactly
// BodySize bytes of JSON.
func NewOrder() Order {
	o := Order{
		ID:       "order-7f3c9a12-5b1e-4c8d-9e2f-0a6b4d8c1e37",
		Customer: "customer-000042",
		Amount:   129900,
		Currency: "EUR",
		Items:    []string{"sku-1001", "sku-2002", "sku-3003"},
	}
	b, _ := json.Marshal(o)
	if n := BodySize - len(b); n > 0 {
		o.Note = strings.Repeat("n", n)
	}
	return o
}
