// Package peers is acemq's peer benchmark suite: the same work as the
// internal/perf benchmarks (confirmed publishes of a 256-byte JSON order
// with a full envelope into a quorum queue, consuming with manual acks at
// prefetch 200), measured in the same run through raw amqp091-go with a
// bare body (raw), raw amqp091-go writing the contract's headers
// (rawhdr), acemq, and the Go library users would otherwise pick,
// Watermill with watermill-amqp (watermill), configured as its
// documentation recommends for durable, confirmed publishing; and the
// scaling benchmarks (consumers per connection, senders, handlers) whose
// curves cmd/perfplot draws for docs/performance.md.
//
// It is a module of its own (bench/peers/go.mod, with a replace directive
// to the repository's root), so that Watermill and the plotting library
// stay out of the library's dependencies: `go test ./...` at the root does
// not reach it. Its benchmarks need a broker (ACEMQ_TEST_AMQP_URL) and run
// only with -bench; scripts/perf-compare -w peers and scripts/perf-scale
// run them and print or draw the results.
package peers
