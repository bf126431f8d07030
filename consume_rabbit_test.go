package acemq_test

import "testing"

// TestEngineRabbitMQ runs every decision path of consume_test.go against
// RabbitMQ (ACEMQ_TEST_AMQP_URL; skipped locally when unset, a failure in
// CI). Each path uses its own uniquely named queues and deletes them,
// .dlq, .parked and rungs included.
func TestEngineRabbitMQ(t *testing.T) {
	rabbitBackend.open(t) // skip early when no broker is configured
	for _, p := range enginePaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			p.run(t, rabbitBackend)
		})
	}
}
