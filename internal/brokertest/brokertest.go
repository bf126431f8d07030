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
	"net/url"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/queues"
	_ "github.com/acemq/acemq/rabbitmq" // registers amqp:// for Each
	"github.com/acemq/acemq/topology"
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
func Connect(t testing.TB, url string, opts ...acemq.ConnOption) *acemq.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), closeTimeout)
	defer cancel()
	c, err := acemq.Connect(ctx, url, append([]acemq.ConnOption{acemq.WithName(t.Name())}, opts...)...)
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
	DeleteAtEnd(t, c, q, contract.DeadLetterQueue(q), contract.ParkedQueue(q))
	if err := topology.New().Queue(q, topology.WithQueueType(topology.QueueClassic)).Apply(context.Background(), c); err != nil {
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
		// One queue at a time, each without its dead-letter half: a
		// topology naming q and q.dlq with quorum queues' default
		// dead-lettering would declare q.dlq twice and be refused whole.
		for _, q := range queues {
			_ = topology.New().Queue(q, topology.WithDeadLettering(false)).Delete(ctx, c)
		}
	})
}

// Get waits for a message on queue, acks it and returns it as the driver
// delivered it (raw headers, properties and all). The test fails when none
// arrives within testenv.Patience.
func Get(t testing.TB, c *acemq.Conn, queue string) driver.Delivery {
	t.Helper()
	var d driver.Delivery
	testenv.Eventually(t, "a message on "+queue, func() bool {
		var ok bool
		err := c.Raw(func(dc driver.Conn) error {
			m, got, err := dc.(driver.Getter).Get(context.Background(), queue)
			if err != nil || !got {
				return err
			}
			if err := m.Ack(); err != nil {
				return fmt.Errorf("acking a message from %s: %w", queue, err)
			}
			d, ok = m, true
			return nil
		})
		if err != nil {
			t.Fatalf("getting from %s: %v", queue, err)
		}
		return ok
	})
	return d
}

// Depth is the number of ready messages on queue.
func Depth(t testing.TB, c *acemq.Conn, queue string) int {
	t.Helper()
	info, err := queues.Inspect(context.Background(), c, queue)
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

// FullConn is a driver connection with every optional part, as both
// built-in drivers are.
type FullConn interface {
	driver.Conn
	driver.Inspector
	driver.Deleter
	driver.Getter
	driver.BatchPublisher
	driver.Pinger
	driver.BlockReporter
	driver.CapabilityReporter
	driver.Unbinder
}

// Driver is the driver connection under c, for tests that publish what the
// library never would, or look at the broker behind the library's back. It
// panics when c is closed or its driver lacks an optional part. Unlike what
// Conn.Raw asks of applications, tests keep the driver connection past the
// callback: they own c for the test's length and never close the driver
// connection themselves.
func Driver(c *acemq.Conn) FullConn {
	var d FullConn
	if err := c.Raw(func(dc driver.Conn) error {
		fc, ok := dc.(FullConn)
		if !ok {
			return fmt.Errorf("the driver connection %T lacks an optional part", dc)
		}
		d = fc
		return nil
	}); err != nil {
		panic("brokertest: " + err.Error())
	}
	return d
}

// Outbound is a fully formed message for Publish.
type Outbound struct {
	Exchange        string
	RoutingKey      string
	Envelope        acemq.Envelope // the zero value means a fresh one
	ContentType     string
	Body            []byte
	ReplyTo         string
	CorrelationID   string
	AllowUnroutable bool
	AlwaysConfirm   bool
}

// Publish sends m through c's publish path (with its telemetry), as the
// library's own packages do.
func Publish(ctx context.Context, c *acemq.Conn, m Outbound) error {
	env := m.Envelope
	if env.ID() == "" {
		env = acemq.MustEnvelope(acemq.Fields{})
	}
	return engine.Of(c).Publish(ctx, driver.Message{
		Exchange:      m.Exchange,
		RoutingKey:    m.RoutingKey,
		Mandatory:     !m.AllowUnroutable,
		AlwaysConfirm: m.AlwaysConfirm,
		ContentType:   m.ContentType,
		MessageID:     env.ID(),
		CorrelationID: m.CorrelationID,
		ReplyTo:       m.ReplyTo,
		Headers:       env.AppendHeaders(nil, m.RoutingKey),
		Body:          m.Body,
	})
}

// Tracing reports whether c records spans now.
func Tracing(c *acemq.Conn) bool { return engine.Of(c).Tracing() }

// DriverAs is the driver connection under c as a T (a test's own driver
// type). It panics when c is closed or its driver connection is not a T.
func DriverAs[T any](c *acemq.Conn) T {
	var v T
	if err := c.Raw(func(dc driver.Conn) error {
		t, ok := dc.(T)
		if !ok {
			return fmt.Errorf("the driver connection is a %T, not a %T", dc, v)
		}
		v = t
		return nil
	}); err != nil {
		panic("brokertest: " + err.Error())
	}
	return v
}

// MemoryDriver is a test transport over the memory broker: registered
// under a scheme, SCHEME://NAME opens the memory broker memory://NAME and
// hands its connection to Wrap, whose answer the caller gets: a
// driver.Conn that records, holds back or breaks what a test needs.
type MemoryDriver struct {
	Wrap func(FullConn) driver.Conn
}

// Open opens the memory broker the URL names and wraps its connection.
func (d MemoryDriver) Open(ctx context.Context, cfg driver.Config) (driver.Conn, error) {
	u, err := url.Parse(cfg.URLs[0])
	if err != nil {
		return nil, err
	}
	cfg.URLs = []string{"memory://" + u.Host + u.Path}
	inner, err := memory.Driver{}.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return d.Wrap(inner.(FullConn)), nil
}
