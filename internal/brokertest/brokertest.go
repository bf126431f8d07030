// Package brokertest is the scaffolding of tests that run the same checks
// on both brokers: a memory:// broker of the test's own and RabbitMQ
// (through testenv: skipped without ACEMQ_TEST_AMQP_URL, failed in CI), with
// connections, uniquely named queues and consumers cleaned up when the test
// ends.
//
// It imports package acemq, so package acemq's internal tests cannot use
// it; its external tests (package acemq_test) and every other package's
// tests can.
package brokertest

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/memory"
	_ "github.com/acemq/acemq/rabbitmq" // registers amqp:// for Each
)

// closeTimeout bounds connecting, closing a connection and draining a
// consumer.
const closeTimeout = 30 * time.Second

var brokers atomic.Int64

// MemoryURL returns the URL of a new memory broker named after the test (a
// different one at each call), discarded when the test ends.
func MemoryURL(t testing.TB) string {
	url := fmt.Sprintf("memory://%s-%d", testenv.Name(t), brokers.Add(1))
	t.Cleanup(func() { memory.Reset(url) })
	return url
}

// Each runs f as the subtest "memory", on a fresh memory broker, and as the
// subtest "rabbitmq", on RabbitMQ.
func Each(t *testing.T, f func(t *testing.T, url string)) {
	t.Run("memory", func(t *testing.T) { f(t, MemoryURL(t)) })
	t.Run("rabbitmq", func(t *testing.T) { f(t, testenv.AMQPURL(t)) })
}

// Connect opens a connection to url named after the test (an acemq.WithName
// in opts overrides that), closed when the test ends.
func Connect(t testing.TB, url string, opts ...acemq.Option) *acemq.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	c, err := acemq.Connect(ctx, url, append([]acemq.Option{acemq.WithName(t.Name())}, opts...)...)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// Queue declares a durable classic queue named testenv.Unique(t, prefix)
// and returns its name. The queue, its .dlq and its .parked queue are
// deleted through c when the test ends.
func Queue(t testing.TB, c *acemq.Conn, prefix string) string {
	t.Helper()
	q := testenv.Unique(t, prefix)
	DeleteAtEnd(t, c, q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q))
	if _, err := c.Transport().DeclareQueue(context.Background(), driver.Queue{Name: q, Durable: true}); err != nil {
		t.Fatalf("declaring %s: %v", q, err)
	}
	return q
}

// DeleteAtEnd deletes the named queues through c when the test ends (before
// a connection opened by Connect earlier in the test is closed), ignoring
// errors: a queue may never have been declared.
func DeleteAtEnd(t testing.TB, c *acemq.Conn, queues ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		defer cancel()
		for _, q := range queues {
			_, _ = c.Transport().DeleteQueue(ctx, q)
		}
	})
}

// Get waits for a message on queue, acks it and returns it. The test fails
// when none arrives within testenv.Patience.
func Get(t testing.TB, c *acemq.Conn, queue string) driver.Delivery {
	t.Helper()
	var d driver.Delivery
	testenv.Eventually(t, "a message on "+queue, func() bool {
		m, ok, err := c.Transport().Get(context.Background(), queue)
		if err != nil {
			t.Fatalf("getting from %s: %v", queue, err)
		}
		if ok {
			if err := m.Ack(); err != nil {
				t.Fatalf("acking a message from %s: %v", queue, err)
			}
			d = m
		}
		return ok
	})
	return d
}

// Depth is the number of ready messages on queue.
func Depth(t testing.TB, c *acemq.Conn, queue string) int {
	t.Helper()
	info, err := c.Transport().InspectQueue(context.Background(), queue)
	if err != nil {
		t.Fatalf("inspecting %s: %v", queue, err)
	}
	return info.Messages
}

// Receive waits for a value on ch. The test fails when none comes within
// testenv.Patience.
func Receive[T any](t testing.TB, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(testenv.Patience):
		t.Fatalf("nothing received within %v", testenv.Patience)
	}
	var zero T
	return zero
}

// Stop closes each consumer, draining it, and fails the test (after trying
// them all) when one does not close cleanly.
func Stop(t testing.TB, cs ...*acemq.Consumer) {
	t.Helper()
	failed := false
	for _, c := range cs {
		ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
		if err := c.Close(ctx); err != nil {
			t.Errorf("closing the consumer of %s: %v", c.Queue(), err)
			failed = true
		}
		cancel()
	}
	if failed {
		t.FailNow()
	}
}
