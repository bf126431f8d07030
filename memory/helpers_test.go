package memory

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
)

func TestMain(m *testing.M) {
	goleak.VerifyTestMain(m)
}

var brokerCounter atomic.Int64

// newURL returns the URL of a fresh broker, reset when the test ends.
func newURL(t *testing.T) string {
	t.Helper()
	url := fmt.Sprintf("memory://%s-%d", testenv.Name(t), brokerCounter.Add(1))
	t.Cleanup(func() { Reset(url) })
	return url
}

// dial opens a connection to url, closed when the test ends. It returns
// the concrete connection, so that tests can use the optional interfaces
// it implements.
func dial(t *testing.T, url string) *conn {
	t.Helper()
	dc, err := Driver{}.Open(context.Background(), driver.Config{URLs: []string{url}})
	if err != nil {
		t.Fatalf("open %s: %v", url, err)
	}
	t.Cleanup(func() { _ = dc.Close() })
	c, ok := dc.(*conn)
	if !ok {
		t.Fatalf("open %s returned a %T, want *conn", url, dc)
	}
	return c
}

// fresh opens a connection to a new broker.
func fresh(t *testing.T) *conn {
	t.Helper()
	return dial(t, newURL(t))
}

var ctx = context.Background()

func mustQueue(t *testing.T, c driver.Conn, q driver.Queue) driver.QueueInfo {
	t.Helper()
	info, err := c.DeclareQueue(ctx, q)
	if err != nil {
		t.Fatalf("declare queue %q: %v", q.Name, err)
	}
	return info
}

func mustExchange(t *testing.T, c driver.Conn, name, kind string) {
	t.Helper()
	if err := c.DeclareExchange(ctx, driver.Exchange{Name: name, Kind: kind, Durable: true}); err != nil {
		t.Fatalf("declare exchange %q: %v", name, err)
	}
}

func mustBind(t *testing.T, c driver.Conn, ex, q, key string) {
	t.Helper()
	if err := c.Bind(ctx, driver.Binding{Exchange: ex, Queue: q, RoutingKey: key}); err != nil {
		t.Fatalf("bind %q to %q on %q: %v", q, ex, key, err)
	}
}

func mustPublish(t *testing.T, c driver.Conn, m driver.Message) {
	t.Helper()
	if err := c.Publish(ctx, m); err != nil {
		t.Fatalf("publish to %q/%q: %v", m.Exchange, m.RoutingKey, err)
	}
}

func mustConsume(t *testing.T, c driver.Conn, spec driver.ConsumeSpec) driver.Subscription {
	t.Helper()
	s, err := c.Consume(ctx, spec)
	if err != nil {
		t.Fatalf("consume %q: %v", spec.Queue, err)
	}
	t.Cleanup(func() { _ = s.Close() })
	return s
}

func recv(t *testing.T, s driver.Subscription) driver.Delivery {
	t.Helper()
	select {
	case d, ok := <-s.Deliveries():
		if !ok {
			t.Fatal("deliveries channel closed, want a delivery")
		}
		return d
	case <-time.After(3 * time.Second):
		t.Fatal("no delivery within 3s")
	}
	panic("unreachable")
}

func noRecv(t *testing.T, s driver.Subscription, wait time.Duration) {
	t.Helper()
	select {
	case d, ok := <-s.Deliveries():
		if ok {
			t.Fatalf("unexpected delivery %q (routing key %q)", d.Body, d.RoutingKey)
		}
	case <-time.After(wait):
	}
}

func waitClosed(t *testing.T, s driver.Subscription) {
	t.Helper()
	deadline := time.After(3 * time.Second)
	for {
		select {
		case _, ok := <-s.Deliveries():
			if !ok {
				return
			}
		case <-deadline:
			t.Fatal("deliveries channel not closed within 3s")
		}
	}
}

func mustGet(t *testing.T, c *conn, q string) driver.Delivery {
	t.Helper()
	d, ok, err := c.Get(ctx, q)
	if err != nil {
		t.Fatalf("get %q: %v", q, err)
	}
	if !ok {
		t.Fatalf("get %q: queue empty", q)
	}
	return d
}

func messages(t *testing.T, c *conn, q string) int {
	t.Helper()
	info, err := c.InspectQueue(ctx, q)
	if err != nil {
		t.Fatalf("inspect %q: %v", q, err)
	}
	return info.Messages
}
