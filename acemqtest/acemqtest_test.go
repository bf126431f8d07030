package acemqtest_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/queues"
	_ "github.com/acemq/acemq/rabbitmq"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type order struct {
	ID string `json:"id"`
}

// TestURLIsTheTestsOwnBroker: each URL is a fresh broker, emptied when
// the test ends.
func TestURLIsTheTestsOwnBroker(t *testing.T) {
	var url string
	t.Run("uses it", func(t *testing.T) {
		url = acemqtest.URL(t)
		if other := acemqtest.URL(t); other == url || !strings.HasPrefix(url, "memory://") {
			t.Fatalf("two URLs %s and %s", url, other)
		}
		c := acemqtest.Connect(t, url)
		acemqtest.Declare(t, c, topology.New().Queue("kept"))
		if err := topology.New().Queue("left-behind").Apply(context.Background(), c); err != nil {
			t.Fatal(err)
		}
	})
	c := acemqtest.Connect(t, url)
	for _, q := range []string{"kept", "left-behind"} {
		if _, err := queues.Inspect(context.Background(), c, q); !errors.Is(err, acemq.ErrNotFound) {
			t.Errorf("after the test, %s is still on its broker (%v)", q, err)
		}
	}
}

// TestWaitIdle: WaitIdle returns only once retries waiting in the consumer
// and on a broker rung have been settled.
func TestWaitIdle(t *testing.T) {
	for name, policy := range map[string]retry.Policy{
		"in the consumer":  retry.Fixed(3, 50*time.Millisecond),
		"on a broker rung": retry.Fixed(3, 100*time.Millisecond).WaitInBrokerFrom(100 * time.Millisecond),
	} {
		t.Run(name, func(t *testing.T) {
			ctx := context.Background()
			conn := acemqtest.Connect(t, acemqtest.URL(t))
			acemqtest.Declare(t, conn, topology.New().Queue("orders.new", topology.WithDeadLettering(true), acemq.WithRetry(policy)))
			settled := acemqtest.Record(t, conn)
			var calls atomic.Int32
			consumer, err := acemq.Consume(ctx, conn, "orders.new", func(ctx context.Context, m acemq.Message[order]) acemq.Ack {
				calls.Add(1)
				if m.Envelope.Attempt() < 3 {
					return acemq.Retry(errors.New("not yet"))
				}
				return acemq.Accept()
			}, acemq.WithRetry(policy), acemq.WithConcurrency(2))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = consumer.Close(context.Background()) })
			pub := acemq.NewPublisher[order](conn, "")
			for i := range 2 {
				if _, err := pub.Send(ctx, "orders.new", order{ID: fmt.Sprint(i)}); err != nil {
					t.Fatal(err)
				}
			}
			acemqtest.WaitIdle(t, conn, consumer)
			// Six handler calls in all: two messages, three attempts each
			// at most; none is left to run once WaitIdle returns.
			if n := calls.Load(); n != 6 {
				t.Fatalf("WaitIdle returned after %d handler calls, want 6", n)
			}
			if got := settled.Count(); got != 6 {
				t.Fatalf("%d settlements, want 6: %v", got, settled.All())
			}
			if got := settled.Count(acemq.OutcomeAcked); got != 2 {
				t.Errorf("%d acked, want 2", got)
			}
			if got := settled.Count(acemq.OutcomeRetried); got != 4 {
				t.Errorf("%d retried, want 4", got)
			}
		})
	}
}

// TestRecorderAndPeek: Wait returns the settlements in order; Peek shows
// what a queue holds and leaves it there.
func TestRecorderAndPeek(t *testing.T) {
	ctx := context.Background()
	conn := acemqtest.Connect(t, acemqtest.URL(t))
	acemqtest.Declare(t, conn, topology.New().Queue("orders.new", topology.WithDeadLettering(true)))
	settled := acemqtest.Record(t, conn)
	consumer, err := acemq.Consume(ctx, conn, "orders.new", func(ctx context.Context, m acemq.Message[order]) acemq.Ack {
		if m.Payload.ID == "bad" {
			return acemq.Reject(errors.New("no such customer"))
		}
		return acemq.Accept()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close(ctx)
	pub := acemq.NewPublisher[order](conn, "")
	for _, id := range []string{"good", "bad"} {
		if _, err := pub.Send(ctx, "orders.new", order{ID: id}); err != nil {
			t.Fatal(err)
		}
	}
	got := settled.Wait(t, 2)
	if got[0].Outcome != acemq.OutcomeAcked || got[1].Outcome != acemq.OutcomeRejected {
		t.Fatalf("outcomes %s, %s", got[0].Outcome, got[1].Outcome)
	}
	for range 2 {
		dead := acemqtest.Peek(t, conn, "orders.new.dlq")
		if len(dead) != 1 || string(dead[0].Payload) != `{"id":"bad"}` || dead[0].Envelope.Reason() != "the handler rejected it: Error: no such customer" {
			t.Fatalf("the dead-letter queue holds %d: %v", len(dead), dead)
		}
	}
}

// TestOnRabbitMQ: the helpers that are not about memory:// work on
// RabbitMQ.
func TestOnRabbitMQ(t *testing.T) {
	ctx := context.Background()
	conn := acemqtest.Connect(t, testenv.AMQPURL(t))
	q := testenv.Unique(t, "acemqtest")
	acemqtest.Declare(t, conn, topology.New().Queue(q, topology.WithDeadLettering(true)))
	settled := acemqtest.Record(t, conn)
	consumer, err := acemq.Consume(ctx, conn, q, func(ctx context.Context, m acemq.Message[order]) acemq.Ack {
		return acemq.Park(errors.New("look at it"))
	})
	if err != nil {
		t.Fatal(err)
	}
	defer consumer.Close(ctx)
	if _, err := acemq.NewPublisher[order](conn, "").Send(ctx, q, order{ID: "o-1"}); err != nil {
		t.Fatal(err)
	}
	acemqtest.WaitIdle(t, conn, consumer)
	if settled.Count(acemq.OutcomeParked) != 1 {
		t.Fatalf("settlements %v", settled.All())
	}
	if parked := acemqtest.Peek(t, conn, contract.ParkedQueue(q)); len(parked) != 1 {
		t.Fatalf("%d parked", len(parked))
	}
}
