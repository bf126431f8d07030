package acemq_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/retry"
)

// goneScheme is a test transport: the memory broker behind a driver.Conn
// whose deliveries' acknowledgers say the channel is gone once channelGone
// is set, as the RabbitMQ driver's do after a lost connection.
const goneScheme = "acemq-gone"

var channelGone atomic.Bool

func init() {
	driver.Register(goneScheme, brokertest.MemoryDriver{Wrap: func(c brokertest.FullConn) driver.Conn { return goneConn{c} }})
}

type goneConn struct{ brokertest.FullConn }

func (c goneConn) Consume(ctx context.Context, spec driver.ConsumeSpec) (driver.Subscription, error) {
	sub, err := c.FullConn.Consume(ctx, spec)
	if err != nil {
		return nil, err
	}
	out := make(chan driver.Delivery)
	go func() {
		defer close(out)
		for d := range sub.Deliveries() {
			d.Acknowledger = goneAcker{d.Acknowledger}
			out <- d
		}
	}()
	return goneSub{sub, out}, nil
}

type goneSub struct {
	driver.Subscription
	out chan driver.Delivery
}

func (s goneSub) Deliveries() <-chan driver.Delivery { return s.out }

type goneAcker struct{ driver.Acknowledger }

func (goneAcker) CanSettle(uint64) bool { return !channelGone.Load() }

// A retry waiting in the consumer whose channel goes away must not publish
// its copy: the broker redelivers the original, and a copy would make the
// message run twice.
func TestRetryWaitSkipsTheCopyWhenTheChannelIsGone(t *testing.T) {
	channelGone.Store(false)
	t.Cleanup(func() { channelGone.Store(false) })
	ctx := context.Background()
	name := "gone-" + randomHex(4)
	conn, err := acemq.Connect(ctx, goneScheme+"://"+name)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()); memory.Reset(name) })
	q := "orders.gone"
	if _, err := brokertest.Driver(conn).DeclareQueue(ctx, driver.Queue{Name: q, Durable: true}); err != nil {
		t.Fatal(err)
	}
	settled := make(chan acemq.Settlement, 4)
	conn.OnSettle(func(s acemq.Settlement) { settled <- s })
	calls := make(chan int, 4)
	c, err := acemq.Consume(ctx, conn, q, func(_ context.Context, m acemq.Message[string]) acemq.Ack {
		calls <- m.Envelope.Attempt()
		channelGone.Store(true) // the connection dies while the retry waits
		return acemq.Retry(errors.New("the stock service timed out"))
	}, acemq.WithRetry(retry.Fixed(2, 100*time.Millisecond).WaitInBrokerFrom(0)))
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acemq.NewPublisher[string](conn, "").Send(ctx, q, "o-1"); err != nil {
		t.Fatal(err)
	}
	var s acemq.Settlement
	select {
	case s = <-settled:
	case <-time.After(20 * time.Second):
		t.Fatal("no settlement")
	}
	if s.Outcome != acemq.OutcomeRequeued || !errors.Is(s.SettleErr, driver.ErrChannelClosed) {
		t.Fatalf("settlement %+v: want requeued with ErrChannelClosed", s)
	}
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
	// Only the original is on the queue, back from the closed channel,
	// still on attempt 1: no copy with attempt 2 was published.
	d, ok, err := brokertest.Driver(conn).Get(ctx, q)
	if err != nil || !ok {
		t.Fatalf("Get: ok=%v err=%v", ok, err)
	}
	if env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID); env.Attempt() != 1 {
		t.Errorf("the message on the queue is on attempt %d, want the original's 1", env.Attempt())
	}
	_ = d.Ack()
	if _, ok, _ := brokertest.Driver(conn).Get(ctx, q); ok {
		t.Error("a copy of the message was published after its channel was gone")
	}
	if n := len(calls); n != 1 {
		t.Errorf("the handler ran %d times, want 1", n)
	}
}
