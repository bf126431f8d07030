package acemq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// A consumer that cannot start because its queue does not exist declares
// nothing: no .dlq, no .parked, no rung left behind.
func TestConsumeMissingQueueDeclaresNothing(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		conn := brokertest.Connect(t, url)
		ctx := context.Background()
		q := testenv.Unique(t, "acemq-missing")
		policy := retry.Fixed(3, time.Minute) // one rung, q.retry.1m
		rung := contract.RungQueue(q, time.Minute)
		// Deleted at the end in case the consumer wrongly declares them.
		brokertest.DeleteAtEnd(t, conn, q, contract.DeadLetterQueue(q), contract.ParkedQueue(q), rung)
		h := func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Accept() }
		_, err := acemq.Consume(ctx, conn, q, h, acemq.WithRetry(policy))
		if !errors.Is(err, acemq.ErrNotFound) {
			t.Fatalf("consuming a missing queue: %v, want an error wrapping ErrNotFound", err)
		}
		for _, name := range []string{contract.DeadLetterQueue(q), contract.ParkedQueue(q), rung} {
			if _, err := queues.Inspect(ctx, conn, name); !errors.Is(err, acemq.ErrNotFound) {
				t.Errorf("the consumer that could not start left %s behind (inspect: %v)", name, err)
			}
		}

		// With WithTopology declaring the queue, the same consumer starts
		// and declares its dead-letter half and rung.
		c, err := acemq.Consume(ctx, conn, q, h, acemq.WithRetry(policy),
			acemq.WithTopology(topology.New().Queue(q, topology.WithQueueType(topology.QueueClassic))))
		if err != nil {
			t.Fatal(err)
		}
		defer brokertest.Stop(t, c)
		for _, name := range []string{q, contract.DeadLetterQueue(q), contract.ParkedQueue(q), rung} {
			if _, err := queues.Inspect(ctx, conn, name); err != nil {
				t.Errorf("after a start with WithTopology, %s: %v", name, err)
			}
		}
	})
}
