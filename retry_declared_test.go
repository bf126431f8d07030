package acemq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// The retry policy given to Topology.Queue and the one given to Consume
// must agree: a consumer given another policy than the one its queue was
// declared with (on this connection, or with WithTopology) refuses to
// start, naming both; a consumer given none takes the queue's.
func TestConsumeRetryPolicyAgreesWithTopology(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		conn := brokertest.Connect(t, url)
		ctx := context.Background()
		h := func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Accept() }
		declared := retry.Exponential(3, 40*time.Second, time.Minute)
		other := retry.Fixed(2, 10*time.Millisecond)

		q := testenv.Unique(t, "acemq-policy")
		topo := topology.New().Queue(q, topology.WithDeadLettering(true), acemq.WithRetry(declared))
		t.Cleanup(func() { _ = topo.Delete(context.Background(), conn) })
		if err := topo.Apply(ctx, conn); err != nil {
			t.Fatal(err)
		}
		_, err := acemq.Consume(ctx, conn, q, h, acemq.WithRetry(other))
		if err == nil {
			t.Fatal("a consumer with another policy than its queue's started")
		}
		for _, want := range []string{q, other.String(), declared.String()} {
			if !strings.Contains(err.Error(), want) {
				t.Errorf("the error does not name %q: %v", want, err)
			}
		}
		if !errors.Is(err, acemq.ErrRetryPolicyMismatch) {
			t.Errorf("the error does not wrap ErrRetryPolicyMismatch: %v", err)
		}

		// No WithRetry: the consumer takes the queue's policy.
		c, err := acemq.Consume(ctx, conn, q, h)
		if err != nil {
			t.Fatal(err)
		}
		if got := c.Policy(); got.String() != declared.String() {
			t.Errorf("a consumer without WithRetry runs %s, want its queue's %s", got, declared)
		}
		brokertest.Stop(t, c)

		// The same policy given twice is fine.
		c, err = acemq.Consume(ctx, conn, q, h, acemq.WithRetry(declared))
		if err != nil {
			t.Fatal(err)
		}
		brokertest.Stop(t, c)

		// WithTopology: refused before anything is declared.
		q2 := testenv.Unique(t, "acemq-policy2")
		topo2 := topology.New().Queue(q2, topology.WithDeadLettering(true), acemq.WithRetry(declared))
		t.Cleanup(func() { _ = topo2.Delete(context.Background(), conn) })
		if _, err := acemq.Consume(ctx, conn, q2, h, acemq.WithTopology(topo2), acemq.WithRetry(other)); !errors.Is(err, acemq.ErrRetryPolicyMismatch) {
			t.Errorf("WithTopology with another policy: %v, want ErrRetryPolicyMismatch", err)
		}
		if _, err := queues.Inspect(ctx, conn, q2); !errors.Is(err, acemq.ErrNotFound) {
			t.Errorf("the refused consumer applied its topology: inspect %s: %v", q2, err)
		}
	})
}

// A topology that gives one queue two different policies is refused.
func TestTopologyQueueWithTwoPolicies(t *testing.T) {
	err := topology.New().
		Queue("jobs", acemq.WithRetry(retry.Fixed(3, time.Second))).
		Queue("jobs", acemq.WithRetry(retry.Fixed(4, time.Second))).
		Validate()
	if err == nil || !strings.Contains(err.Error(), "fixed(3, 1s)") || !strings.Contains(err.Error(), "fixed(4, 1s)") {
		t.Errorf("two policies for one queue: %v", err)
	}
}
