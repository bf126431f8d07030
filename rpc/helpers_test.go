package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/google/uuid"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

// env is one broker for one test: memory:// (a fresh broker per test) or
// RabbitMQ (uniquely named queues, deleted when the test ends).
type env struct {
	t     *testing.T
	url   string
	amqp  bool
	admin *acemq.Conn
	mu    sync.Mutex
	names []string
}

// each runs f on the memory broker and on RabbitMQ (skipped when
// ACEMQ_TEST_AMQP_URL is unset, failed in CI).
func each(t *testing.T, f func(t *testing.T, e *env)) {
	brokertest.Each(t, func(t *testing.T, url string) { f(t, newEnv(t, url)) })
}

func newEnv(t *testing.T, url string) *env {
	e := &env{t: t, url: url, amqp: !strings.HasPrefix(url, "memory:")}
	admin, err := acemq.Connect(context.Background(), url, acemq.WithName("rpc-test-admin"))
	if err != nil {
		t.Fatalf("connect %s: %v", url, err)
	}
	e.admin = admin
	// Registered first, so it runs last: after every connection of the
	// test is closed, delete what the test named, then close the admin.
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		e.mu.Lock()
		names := e.names
		e.mu.Unlock()
		for _, n := range names {
			_, _ = brokertest.Driver(admin).DeleteQueue(ctx, n)
		}
		_ = admin.Close(ctx)
	})
	return e
}

// connect opens a connection closed when the test ends.
func (e *env) connect(opts ...acemq.ConnOption) *acemq.Conn {
	e.t.Helper()
	c, err := acemq.Connect(context.Background(), e.url, opts...)
	if err != nil {
		e.t.Fatalf("connect %s: %v", e.url, err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// name returns a unique queue name; the queue, its .dlq and its .parked
// are deleted when the test ends.
func (e *env) name(prefix string) string {
	n := prefix + "-" + uuid.NewString()[:8]
	e.forget(n, contract.DeadLetterQueue(n), contract.ParkedQueue(n))
	return n
}

// forget schedules queues for deletion when the test ends.
func (e *env) forget(names ...string) {
	e.mu.Lock()
	e.names = append(e.names, names...)
	e.mu.Unlock()
}

// queue declares a durable queue with a unique name.
func (e *env) queue(prefix string) string {
	e.t.Helper()
	n := e.name(prefix)
	if _, err := brokertest.Driver(e.admin).DeclareQueue(context.Background(), driver.Queue{Name: n, Durable: true}); err != nil {
		e.t.Fatalf("declare %s: %v", n, err)
	}
	return n
}

// get fetches one message from a queue, polling until one is there.
func (e *env) get(queue string) driver.Delivery {
	e.t.Helper()
	return brokertest.Get(e.t, e.admin, queue)
}

// depth is the number of ready messages on a queue.
func (e *env) depth(queue string) int {
	e.t.Helper()
	return brokertest.Depth(e.t, e.admin, queue)
}

// rawConsume subscribes to queue through the transport underneath, as a
// program that knows nothing of acemq would, and hands each delivery to f
// on one goroutine until the test ends.
func rawConsume(t *testing.T, c *acemq.Conn, queue string, f func(d driver.Delivery)) {
	t.Helper()
	sub, err := brokertest.Driver(c).Consume(context.Background(), driver.ConsumeSpec{Queue: queue, Prefetch: 10})
	if err != nil {
		t.Fatalf("raw consume %s: %v", queue, err)
	}
	done := make(chan struct{})
	go func() {
		defer close(done)
		for d := range sub.Deliveries() {
			f(d)
			_ = d.Ack()
		}
	}()
	t.Cleanup(func() {
		_ = sub.Close()
		<-done
	})
}

// str reads a header value as a string.
func str(v any) string {
	switch s := v.(type) {
	case string:
		return s
	case []byte:
		return string(s)
	}
	return fmt.Sprint(v)
}

func isNotFound(err error) bool { return errors.Is(err, driver.ErrNotFound) }

var bg = context.Background()

type priceRequest struct {
	SKU string `json:"sku"`
}

type quote struct {
	Pence int `json:"pence"`
}

// hooks intercept a connection's transport: a test driver registered under
// a scheme of its own wraps the real one (memory or RabbitMQ).
type hooks struct {
	// publish wraps every publish; send performs the real one.
	publish func(m driver.Message, send func() error) error
	// acked is called after a delivery on this connection is acked.
	acked func(d driver.Delivery)
}

var hookSeq atomic.Int64

type hookDriver struct {
	h      *hooks
	prefix string
}

func (hd hookDriver) Open(ctx context.Context, cfg driver.Config) (driver.Conn, error) {
	urls := make([]string, len(cfg.URLs))
	for i, u := range cfg.URLs {
		urls[i] = strings.TrimPrefix(u, hd.prefix)
	}
	cfg.URLs = urls
	inner, err := driver.Lookup(urls[0])
	if err != nil {
		return nil, err
	}
	c, err := inner.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return &hookConn{Conn: c, h: hd.h}, nil
}

type hookConn struct {
	driver.Conn
	h *hooks
}

func (c *hookConn) Publish(ctx context.Context, m driver.Message) error {
	if c.h.publish == nil {
		return c.Conn.Publish(ctx, m)
	}
	return c.h.publish(m, func() error { return c.Conn.Publish(ctx, m) })
}

func (c *hookConn) Consume(ctx context.Context, spec driver.ConsumeSpec) (driver.Subscription, error) {
	s, err := c.Conn.Consume(ctx, spec)
	if err != nil || c.h.acked == nil {
		return s, err
	}
	hs := &hookSub{Subscription: s, out: make(chan driver.Delivery), h: c.h}
	go func() {
		defer close(hs.out)
		for d := range s.Deliveries() {
			d.Acknowledger = hookAck{Acknowledger: d.Acknowledger, d: d, h: c.h}
			hs.out <- d
		}
	}()
	return hs, nil
}

type hookSub struct {
	driver.Subscription
	out chan driver.Delivery
	h   *hooks
}

func (s *hookSub) Deliveries() <-chan driver.Delivery { return s.out }

type hookAck struct {
	driver.Acknowledger
	d driver.Delivery
	h *hooks
}

func (a hookAck) Ack(tag uint64) error {
	err := a.Acknowledger.Ack(tag)
	if err == nil {
		a.h.acked(a.d)
	}
	return err
}

// connectHooked opens a connection whose transport runs through h.
func (e *env) connectHooked(h *hooks, opts ...acemq.ConnOption) *acemq.Conn {
	e.t.Helper()
	scheme := fmt.Sprintf("rpchook%d", hookSeq.Add(1))
	inner := e.url[:strings.Index(e.url, "://")]
	prefix := scheme + "+"
	driver.Register(scheme+"+"+inner, hookDriver{h: h, prefix: prefix})
	c, err := acemq.Connect(context.Background(), prefix+e.url, opts...)
	if err != nil {
		e.t.Fatalf("connect hooked %s: %v", e.url, err)
	}
	e.t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}
