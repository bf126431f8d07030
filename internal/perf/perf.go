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
//
// The package's non-test code is the harness the benchmarks share with
// `acemq-bench` (cmd/acemq-bench), so that both measure the same work the same
// way: the payloads (Order; Stamp and SentAt for bodies that carry their
// send time), latency recording with nearest-rank percentiles
// (Latencies, Percentile), Countdown, and the raw amqp091-go references
// acemq is measured against — RawPublisher, RawConsumer, RawRequester and
// RawResponder — which, given an EnvelopeTable, write by hand the headers
// acemq's contract puts on every message (the rawhdr variants).
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
