package brokertest

import (
	"context"
	"errors"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/topology"
)

// TestQueueIsDeletedAtEnd: a queue from Queue and its dead-letter half are
// gone when the test that declared them ends, on both brokers (a cleanup
// that named a queue and its .dlq in one topology was refused as the .dlq
// declared twice, and left every test queue behind).
func TestQueueIsDeletedAtEnd(t *testing.T) {
	Each(t, func(t *testing.T, url string) {
		c := Connect(t, url)
		var q string
		t.Run("declare", func(t *testing.T) {
			q = Queue(t, c, "brokertest")
			for _, n := range []string{contract.DeadLetterQueue(q), contract.ParkedQueue(q)} {
				if err := topology.New().Queue(n, topology.WithQueueType(topology.QueueClassic), topology.WithDeadLettering(false)).Apply(context.Background(), c); err != nil {
					t.Fatalf("declaring %s: %v", n, err)
				}
			}
		})
		for _, n := range []string{q, contract.DeadLetterQueue(q), contract.ParkedQueue(q)} {
			if _, err := queues.Inspect(context.Background(), c, n); !errors.Is(err, acemq.ErrNotFound) {
				t.Errorf("after the test that declared it, inspecting %s: %v, want ErrNotFound", n, err)
			}
		}
	})
}
