package drivertest

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
)

const (
	// waitFor bounds every wait for something the suite expects to happen.
	waitFor = 5 * time.Second
	// quiet is how long the suite watches for something that must not
	// happen (a delivery beyond the prefetch window, say).
	quiet = 300 * time.Millisecond
	// pollEvery is the polling interval for waits.
	pollEvery = 10 * time.Millisecond
)

// env is one conformance test's view of the broker: an admin connection
// that outlives the test body, unique names and cleanup.
type env struct {
	t      *testing.T
	open   func(t *testing.T) driver.Conn
	ctx    context.Context
	admin  driver.Conn
	prefix string
	// caps is what the admin connection reports or, when it is not a
	// driver.CapabilityReporter, what package acemq needs of every broker:
	// publisher confirms and dead-lettering.
	caps driver.Capabilities
	ids  atomic.Int64

	// deleter is the admin connection as a driver.Deleter, or nil: cleanup
	// deletes what the test declared only when the driver can.
	deleter driver.Deleter

	mu sync.Mutex
	// watchers hold, per queue, the subscription that stands in for Get on
	// a connection that is not a driver.Getter (see watcher).
	watchers map[string]driver.Subscription
}

func newEnv(t *testing.T, open func(t *testing.T) driver.Conn) *env {
	t.Helper()
	// Not t.Context(): cleanups that delete what the test declared need a
	// live context, and t.Context is cancelled before cleanups run.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	t.Cleanup(cancel)
	var buf [4]byte
	_, _ = rand.Read(buf[:])
	e := &env{
		t: t, open: open, ctx: ctx,
		prefix:   "acemq-conformance-" + hex.EncodeToString(buf[:]) + "-",
		watchers: map[string]driver.Subscription{},
	}
	e.admin = e.conn()
	if r, ok := e.admin.(driver.CapabilityReporter); ok {
		e.caps = r.Capabilities()
	} else {
		e.caps = driver.Capabilities{PublisherConfirms: true, DeadLettering: true}
	}
	e.deleter, _ = e.admin.(driver.Deleter)
	return e
}

// conn opens another connection, closed when the test ends.
func (e *env) conn() driver.Conn {
	e.t.Helper()
	c := e.open(e.t)
	if c == nil {
		e.t.Fatal("open returned a nil connection")
	}
	e.t.Cleanup(func() { _ = c.Close() })
	return c
}

// id returns a message-id unique to this test run. The suite gives every
// mandatory publish one, as the acemq library does: a driver may correlate
// basic.return with its publish by message-id.
func (e *env) id() string {
	return fmt.Sprintf("%smsg-%d", e.prefix, e.ids.Add(1))
}

// name returns a name unique to this test run.
func (e *env) name(s string) string { return e.prefix + s }

// queue declares a queue on c and deletes it (through the admin connection,
// if the driver can delete) when the test ends.
func (e *env) queue(c driver.Conn, q driver.Queue) driver.QueueInfo {
	e.t.Helper()
	info, err := c.DeclareQueue(e.ctx, q)
	if err != nil {
		e.t.Fatalf("declare queue %q: %v", q.Name, err)
	}
	if info.Name == "" {
		e.t.Fatalf("declare queue %q: the broker reported an empty name", q.Name)
	}
	e.deleteQueueLater(info.Name)
	return info
}

// deleteQueueLater deletes the queue when the test ends, if the driver can
// delete; names are unique to the test run, so one left behind is harmless.
func (e *env) deleteQueueLater(name string) {
	if e.deleter == nil {
		return
	}
	e.t.Cleanup(func() { _, _ = e.deleter.DeleteQueue(context.Background(), name) })
}

// simpleQueue declares a durable classic queue called e.name(s).
func (e *env) simpleQueue(s string) string {
	e.t.Helper()
	return e.queue(e.admin, driver.Queue{Name: e.name(s), Durable: true}).Name
}

// exchange declares a durable exchange called e.name(s), deleted when the
// test ends (if the driver can delete).
func (e *env) exchange(s, kind string) string {
	e.t.Helper()
	name := e.name(s)
	if err := e.admin.DeclareExchange(e.ctx, driver.Exchange{Name: name, Kind: kind, Durable: true}); err != nil {
		e.t.Fatalf("declare %s exchange %q: %v", kind, name, err)
	}
	if e.deleter != nil {
		e.t.Cleanup(func() { _ = e.deleter.DeleteExchange(context.Background(), name) })
	}
	return name
}

func (e *env) bind(ex, q, key string) {
	e.t.Helper()
	if err := e.admin.Bind(e.ctx, driver.Binding{Exchange: ex, Queue: q, RoutingKey: key}); err != nil {
		e.t.Fatalf("bind queue %q to exchange %q with key %q: %v", q, ex, key, err)
	}
}

func (e *env) publish(c driver.Conn, m driver.Message) {
	e.t.Helper()
	if err := c.Publish(e.ctx, m); err != nil {
		e.t.Fatalf("publish to exchange %q with key %q: %v", m.Exchange, m.RoutingKey, err)
	}
}

// consume starts a subscription, closed when the test ends.
func (e *env) consume(c driver.Conn, spec driver.ConsumeSpec) driver.Subscription {
	e.t.Helper()
	s, err := c.Consume(e.ctx, spec)
	if err != nil {
		e.t.Fatalf("consume from %q: %v", spec.Queue, err)
	}
	e.t.Cleanup(func() { _ = s.Close() })
	return s
}

// recv waits for the next delivery.
func (e *env) recv(s driver.Subscription) driver.Delivery {
	e.t.Helper()
	select {
	case d, ok := <-s.Deliveries():
		if !ok {
			e.t.Fatalf("consumer %q: the deliveries channel closed while a delivery was expected", s.Tag())
		}
		return d
	case <-time.After(waitFor):
		e.t.Fatalf("consumer %q: no delivery within %v", s.Tag(), waitFor)
	}
	panic("unreachable")
}

// noRecv checks that nothing arrives for a short while.
func (e *env) noRecv(s driver.Subscription, why string) {
	e.t.Helper()
	select {
	case d, ok := <-s.Deliveries():
		if ok {
			e.t.Fatalf("consumer %q: unexpected delivery %q (%s)", s.Tag(), d.Body, why)
		}
		e.t.Fatalf("consumer %q: the deliveries channel closed unexpectedly (%s)", s.Tag(), why)
	case <-time.After(quiet):
	}
}

// drainUntilClosed reads until the deliveries channel closes, returning
// what arrived on the way.
func (e *env) drainUntilClosed(s driver.Subscription) []driver.Delivery {
	e.t.Helper()
	var got []driver.Delivery
	deadline := time.After(waitFor)
	for {
		select {
		case d, ok := <-s.Deliveries():
			if !ok {
				return got
			}
			got = append(got, d)
		case <-deadline:
			e.t.Fatalf("consumer %q: the deliveries channel did not close within %v", s.Tag(), waitFor)
		}
	}
}

// get waits for a message to be fetchable from q and fetches it: with Get
// when c is a driver.Getter, else from the queue's watcher.
func (e *env) get(c driver.Conn, q string) driver.Delivery {
	e.t.Helper()
	g, ok := c.(driver.Getter)
	if !ok {
		return e.watch(c, q)
	}
	deadline := time.Now().Add(waitFor)
	for {
		d, ok, err := g.Get(e.ctx, q)
		if err != nil {
			e.t.Fatalf("get from %q: %v", q, err)
		}
		if ok {
			return d
		}
		if time.Now().After(deadline) {
			e.t.Fatalf("get from %q: no message within %v", q, waitFor)
		}
		time.Sleep(pollEvery)
	}
}

// expectEmpty checks that q has nothing to fetch. Publishes are confirmed
// by the time the suite calls it, so a message would already be there.
// Without a driver.Getter it watches the queue's watcher for a short while.
func (e *env) expectEmpty(c driver.Conn, q string) {
	e.t.Helper()
	g, ok := c.(driver.Getter)
	if !ok {
		s := e.watcher(c, q)
		select {
		case d, ok := <-s.Deliveries():
			if !ok {
				e.t.Fatalf("queue %q: the watching subscription ended", q)
			}
			_ = d.Ack()
			e.t.Fatalf("queue %q: unexpected message %q (routing key %q)", q, d.Body, d.RoutingKey)
		case <-time.After(quiet):
		}
		return
	}
	d, ok, err := g.Get(e.ctx, q)
	if err != nil {
		e.t.Fatalf("get from %q: %v", q, err)
	}
	if ok {
		_ = d.Ack()
		e.t.Fatalf("queue %q: unexpected message %q (routing key %q)", q, d.Body, d.RoutingKey)
	}
}

// watcher returns the subscription that stands in for Get on q when the
// driver has no driver.Getter, starting it on c the first time. It has no
// prefetch limit, so deliveries a test has not settled yet do not hold
// back the next, and it lasts until the test ends: a delivery taken from it
// stays unacknowledged, and settleable, until the test settles it. A test
// must not nack such a delivery with requeue (the watcher would take it
// again) nor consume from a watched queue expecting to get everything.
func (e *env) watcher(c driver.Conn, q string) driver.Subscription {
	e.t.Helper()
	e.mu.Lock()
	defer e.mu.Unlock()
	if s, ok := e.watchers[q]; ok {
		return s
	}
	s := e.consume(c, driver.ConsumeSpec{Queue: q})
	e.watchers[q] = s
	return s
}

// watch waits for the next delivery on q's watcher.
func (e *env) watch(c driver.Conn, q string) driver.Delivery {
	e.t.Helper()
	s := e.watcher(c, q)
	select {
	case d, ok := <-s.Deliveries():
		if !ok {
			e.t.Fatalf("queue %q: the watching subscription ended while a message was expected", q)
		}
		return d
	case <-time.After(waitFor):
		e.t.Fatalf("queue %q: no message within %v", q, waitFor)
	}
	panic("unreachable")
}

// takeAll fetches and acknowledges n messages from q, then checks that it
// is empty, and returns the bodies sorted.
func (e *env) takeAll(c driver.Conn, q string, n int) []string {
	e.t.Helper()
	var bodies []string
	for range n {
		d := e.get(c, q)
		bodies = append(bodies, string(d.Body))
		if err := d.Ack(); err != nil {
			e.t.Fatalf("ack from %q: %v", q, err)
		}
	}
	e.expectEmpty(c, q)
	slices.Sort(bodies)
	return bodies
}

// eventually polls cond until it holds.
func (e *env) eventually(what string, cond func() bool) {
	e.t.Helper()
	deadline := time.Now().Add(waitFor)
	for !cond() {
		if time.Now().After(deadline) {
			e.t.Fatalf("timed out after %v waiting for %s", waitFor, what)
		}
		time.Sleep(pollEvery)
	}
}

// canCount reports whether c is a driver.Inspector, and logs that check is
// not made when it is not: checks that need a count (of ready messages or
// consumers) are made only with an Inspector.
func (e *env) canCount(c driver.Conn, check string) bool {
	e.t.Helper()
	_, ok := c.(driver.Inspector)
	if !ok {
		e.t.Logf("not checked without a driver.Inspector: %s", check)
	}
	return ok
}

// messages reports how many ready messages q holds. c must be a
// driver.Inspector.
func (e *env) messages(c driver.Conn, q string) int {
	e.t.Helper()
	return e.info(c, q).Messages
}

// info inspects q. c must be a driver.Inspector.
func (e *env) info(c driver.Conn, q string) driver.QueueInfo {
	e.t.Helper()
	info, err := as[driver.Inspector](e, c).InspectQueue(e.ctx, q)
	if err != nil {
		e.t.Fatalf("inspect queue %q: %v", q, err)
	}
	return info
}

// eventuallyMessages waits until q holds n ready messages, when c is a
// driver.Inspector; otherwise the check is not made.
func (e *env) eventuallyMessages(c driver.Conn, q string, n int) {
	e.t.Helper()
	what := fmt.Sprintf("%d ready messages on queue %q", n, q)
	if e.canCount(c, what) {
		e.eventually(what, func() bool { return e.messages(c, q) == n })
	}
}

// queueGone reports whether q no longer exists. An Inspector answers with
// a passive declaration (any error but driver.ErrNotFound, such as another
// connection's exclusive queue being locked, counts as not gone); without
// one a mandatory probe is published to q through the default exchange,
// which comes back NO_ROUTE once q has gone (and lands on q, harmlessly,
// while it is still there).
func (e *env) queueGone(c driver.Conn, q string) bool {
	e.t.Helper()
	if ins, ok := c.(driver.Inspector); ok {
		_, err := ins.InspectQueue(e.ctx, q)
		return errors.Is(err, driver.ErrNotFound)
	}
	var re *driver.ReturnError
	err := c.Publish(e.ctx, driver.Message{RoutingKey: q, Mandatory: true, MessageID: e.id(), Transient: true, Body: []byte("probe")})
	if err != nil && !errors.As(err, &re) {
		e.t.Fatalf("probe publish to queue %q: %v", q, err)
	}
	return err != nil
}

// exchangeGone reports whether the exchange ex no longer exists: an
// Inspector's passive declaration fails with driver.ErrNotFound, or else a
// publish to it fails.
func (e *env) exchangeGone(c driver.Conn, ex string) bool {
	e.t.Helper()
	if ins, ok := c.(driver.Inspector); ok {
		return errors.Is(ins.InspectExchange(e.ctx, ex), driver.ErrNotFound)
	}
	return c.Publish(e.ctx, driver.Message{Exchange: ex, RoutingKey: "probe", Transient: true}) != nil
}

// asInt reads an integer header value of any width a driver may hand up:
// the driver package's int8 to int64 and uint8 to uint32. It is stricter
// than wire.Integer on purpose: a Go int, uint or uint64 in a delivered
// header breaks the driver contract, and the conformance checks say so.
func asInt(v any) (int64, bool) {
	switch x := v.(type) {
	case int8:
		return int64(x), true
	case int16:
		return int64(x), true
	case int32:
		return int64(x), true
	case int64:
		return x, true
	case uint8:
		return int64(x), true
	case uint16:
		return int64(x), true
	case uint32:
		return int64(x), true
	}
	return 0, false
}

// firstDeath returns the first x-death entry of a dead-lettered delivery.
func (e *env) firstDeath(d driver.Delivery) driver.Table {
	e.t.Helper()
	arr, ok := d.Headers["x-death"].([]any)
	if !ok || len(arr) == 0 {
		e.t.Fatalf("dead-lettered delivery has no x-death array: headers %#v", d.Headers)
	}
	entry, ok := arr[0].(driver.Table)
	if !ok {
		e.t.Fatalf("x-death entry is a %T, want driver.Table", arr[0])
	}
	return entry
}
