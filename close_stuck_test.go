package acemq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/memory"
)

// stuckScheme is a test transport: the memory broker behind a driver.Conn
// whose subscriptions' Close waits until the connection is closed, as a
// driver's may wait on a broker that does not answer. Closing the
// connection ends it, as driver.Conn.Close requires.
const stuckScheme = "acemq-stuck"

func init() {
	driver.Register(stuckScheme, brokertest.MemoryDriver{Wrap: func(c brokertest.FullConn) driver.Conn {
		return &stuckConn{FullConn: c, closed: make(chan struct{})}
	}})
}

type stuckConn struct {
	brokertest.FullConn
	once   sync.Once
	closed chan struct{}

	closing  atomic.Int32 // subscription Closes begun
	returned atomic.Int32 // subscription Closes returned
}

func (c *stuckConn) Consume(ctx context.Context, spec driver.ConsumeSpec) (driver.Subscription, error) {
	sub, err := c.FullConn.Consume(ctx, spec)
	if err != nil {
		return nil, err
	}
	return &stuckSub{Subscription: sub, c: c}, nil
}

func (c *stuckConn) Close() error {
	c.release()
	return c.FullConn.Close()
}

func (c *stuckConn) release() { c.once.Do(func() { close(c.closed) }) }

type stuckSub struct {
	driver.Subscription
	c *stuckConn
}

func (s *stuckSub) Close() error {
	s.c.closing.Add(1)
	defer s.c.returned.Add(1)
	<-s.c.closed
	return s.Subscription.Close()
}

// stuckConsumer connects over the stuck transport and starts a consumer
// whose handler has taken a delivery.
func stuckConsumer(t *testing.T) (*acemq.Conn, *stuckConn, *acemq.Consumer) {
	t.Helper()
	ctx := context.Background()
	name := "stuck-" + randomHex(4)
	conn, err := acemq.Connect(ctx, stuckScheme+"://"+name)
	if err != nil {
		t.Fatal(err)
	}
	var sc *stuckConn
	_ = conn.Raw(func(c driver.Conn) error { sc = c.(*stuckConn); return nil })
	t.Cleanup(func() {
		sc.release() // a Close that hung before the fix ends
		_ = conn.Close(context.Background())
		memory.Reset(name)
	})
	q := "orders.stuck"
	if _, err := brokertest.Driver(conn).DeclareQueue(ctx, driver.Queue{Name: q, Durable: true}); err != nil {
		t.Fatal(err)
	}
	got := make(chan struct{}, 1)
	c, err := acemq.Consume(ctx, conn, q, func(_ context.Context, m acemq.Message[string]) acemq.Ack {
		got <- struct{}{}
		return acemq.Accept()
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acemq.NewPublisher[string](conn, "").Send(ctx, q, "o-1"); err != nil {
		t.Fatal(err)
	}
	<-got
	return conn, sc, c
}

// within runs f, failing the test if it has not returned within a minute:
// before the fix, a subscription Close that hung held f for ever.
func within(t *testing.T, sc *stuckConn, what string, f func() error) error {
	t.Helper()
	done := make(chan error, 1)
	go func() { done <- f() }()
	select {
	case err := <-done:
		return err
	case <-time.After(time.Minute):
		sc.release()
		<-done
		t.Fatalf("%s waited for the hung subscription Close beyond its context", what)
		return nil
	}
}

func wantStillClosing(t *testing.T, err error) {
	t.Helper()
	if !errors.Is(err, context.DeadlineExceeded) || !strings.Contains(err.Error(), `acemq: the consumer of "orders.stuck" was still closing its subscription when the context ended (closing the connection ends it)`) {
		t.Fatalf("Close: %v, want the consumer still closing its subscription when the context ended", err)
	}
}

// TestCloseIsBoundedByCtxWhenTheSubscriptionCloseHangs: a driver's
// Subscription.Close that does not return holds neither the consumer's
// Close beyond its context nor the connection's Close: the consumer's Close
// says its subscription was still closing, and the connection's Close
// closes the driver connection, which ends the hung Close, and returns once
// it has.
func TestCloseIsBoundedByCtxWhenTheSubscriptionCloseHangs(t *testing.T) {
	t.Run("consumer", func(t *testing.T) {
		conn, sc, c := stuckConsumer(t)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		wantStillClosing(t, within(t, sc, "the consumer's Close", func() error { return c.Close(ctx) }))
		select {
		case <-c.Done():
		default:
			t.Error("Done is not closed after Close returned")
		}
		if err := within(t, sc, "the connection's Close", func() error { return conn.Close(context.Background()) }); err != nil {
			t.Fatal(err)
		}
		if begun, returned := sc.closing.Load(), sc.returned.Load(); begun != 1 || returned != 1 {
			t.Fatalf("after the connection's Close, %d subscription Closes begun and %d returned, want 1 and 1", begun, returned)
		}
	})
	t.Run("connection", func(t *testing.T) {
		conn, sc, _ := stuckConsumer(t)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		wantStillClosing(t, within(t, sc, "the connection's Close", func() error { return conn.Close(ctx) }))
		if begun, returned := sc.closing.Load(), sc.returned.Load(); begun != 1 || returned != 1 {
			t.Fatalf("after the connection's Close, %d subscription Closes begun and %d returned, want 1 and 1", begun, returned)
		}
	})
}
