package acemqtest_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// A test of a retry over rungs of one, two and four hours, which runs in
// a fraction of a second: the test moves the broker's clock, and the
// rungs expire, and the consumer's attempts run, as it passes them.
func ExampleNewClock() {
	var t *testing.T // the test's own: func TestShipping(t *testing.T) { … }

	ctx := context.Background()
	url := acemqtest.URL(t)
	clock := acemqtest.NewClock(t, url) // before the first Connect to url
	conn := acemqtest.Connect(t, url)
	policy := retry.Exponential(4, time.Hour, 4*time.Hour)
	acemqtest.Declare(t, conn, topology.New().
		Queue("orders.new", topology.WithDeadLettering(true), acemq.WithRetry(policy)))
	settled := acemqtest.Record(t, conn)
	var attempts atomic.Int32
	consumer, err := acemq.Consume(ctx, conn, "orders.new", func(ctx context.Context, m acemq.Message[string]) acemq.Ack {
		attempts.Add(1) // clock.Now() says when, on the clock, it runs
		return acemq.Retry(errors.New("the warehouse is closed"))
	}, acemq.WithRetry(policy))
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close(ctx)
	if _, err := acemq.NewPublisher[string](conn, "").Send(ctx, "orders.new", "o-1"); err != nil {
		t.Fatal(err)
	}

	clock.Advance(t, time.Hour-time.Millisecond, conn, consumer)
	if n := attempts.Load(); n != 1 {
		t.Fatalf("%d attempts before the 1h rung expired, want 1", n)
	}
	clock.Advance(t, 6*time.Hour+time.Millisecond, conn, consumer) // to 7h: attempts at 1h, 3h and 7h
	if n := attempts.Load(); n != 4 || settled.Count(acemq.OutcomeDeadLettered) != 1 {
		t.Fatalf("%d attempts and %v, want 4 and the last dead-lettered", n, settled.All())
	}
}
