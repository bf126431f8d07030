package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
)

// fastBackoff shortens the reconnection backoff for the test.
func fastBackoff(t testing.TB) {
	old := backoffBase
	backoffBase = 50 * time.Millisecond
	t.Cleanup(func() { backoffBase = old })
}

type eventLog struct {
	mu     sync.Mutex
	events []driver.Event
}

func (l *eventLog) add(e driver.Event) {
	l.mu.Lock()
	l.events = append(l.events, e)
	l.mu.Unlock()
}

func (l *eventLog) count(k driver.EventKind) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, e := range l.events {
		if e.Kind == k {
			n++
		}
	}
	return n
}

func (l *eventLog) all() []driver.Event {
	l.mu.Lock()
	defer l.mu.Unlock()
	return append([]driver.Event(nil), l.events...)
}

func TestRecoveryRedeclaresAndResubscribes(t *testing.T) {
	fastBackoff(t)
	p := newProxy(t, nil)
	var log eventLog
	c := openTest(t, func(cfg *driver.Config) {
		cfg.URLs = []string{p.url("amqp")}
		cfg.OnEvent = log.add
	})
	ctx := ctxFor(t, 60*time.Second)

	// An exclusive queue dies with its connection: recovery must redeclare
	// it, and its binding, for the consumer to resume.
	ex := uniqueName("x")
	if err := c.DeclareExchange(ctx, driver.Exchange{Name: ex, Kind: driver.Topic}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteExchange(t, ex) })
	q := uniqueName("excl")
	for range 3 { // declaring again does not grow the record
		if _, err := c.DeclareQueue(ctx, driver.Queue{Name: q, Exclusive: true}); err != nil {
			t.Fatal(err)
		}
		if err := c.Bind(ctx, driver.Binding{Queue: q, Exchange: ex, RoutingKey: "a.#"}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := c.DeclareQueue(ctx, driver.Queue{Exclusive: true}); err != nil { // server-named: not recorded
		t.Fatal(err)
	}
	if e, qs, b := c.topo.sizes(); e != 1 || qs != 1 || b != 1 {
		t.Fatalf("recorded topology: %d exchanges, %d queues, %d bindings", e, qs, b)
	}
	sub, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q, Prefetch: 5, Tag: "recovering"})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Publish(ctx, driver.Message{Exchange: ex, RoutingKey: "a.1", Mandatory: true, MessageID: "before"}); err != nil {
		t.Fatal(err)
	}
	d := recvOne(t, sub)
	if d.MessageID != "before" {
		t.Fatalf("got %q", d.MessageID)
	}

	p.cut()
	// A delivery from the dead channel cannot be settled.
	testenv.Eventually(t, "lost event", func() bool { return log.count(driver.EventLost) > 0 })
	if d.CanSettle() {
		t.Error("a delivery from a dead channel says it can still be settled")
	}
	if err := d.Ack(); !errors.Is(err, driver.ErrChannelClosed) {
		t.Fatalf("ack from a dead channel: %v", err)
	}
	// Publish waits for recovery rather than failing.
	if err := c.Publish(ctx, driver.Message{Exchange: ex, RoutingKey: "a.2", Mandatory: true, MessageID: "after"}); err != nil {
		t.Fatalf("publish across recovery: %v", err)
	}
	d = recvOne(t, sub)
	if d.MessageID != "after" || d.ConsumerTag != "recovering" {
		t.Fatalf("after recovery got %+v", d)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	evs := log.all()
	var kinds []driver.EventKind
	for _, e := range evs {
		kinds = append(kinds, e.Kind)
	}
	if len(evs) < 4 || evs[0].Kind != driver.EventLost || evs[0].Err == nil ||
		evs[1].Kind != driver.EventRetrying || evs[1].Attempt != 1 || evs[1].Delay <= 0 ||
		evs[len(evs)-2].Kind != driver.EventRecovered ||
		evs[len(evs)-1].Kind != driver.EventRedeclared || evs[len(evs)-1].Attempt != evs[len(evs)-2].Attempt {
		t.Fatalf("events %v; want lost, retrying …, recovered, redeclared", kinds)
	}
	if _, err := c.InspectQueue(ctx, q); err != nil {
		t.Fatalf("exclusive queue after recovery: %v", err)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-sub.Deliveries(); ok {
		t.Fatal("Deliveries still open after Close")
	}
}

func TestLostPublishIsReportedLost(t *testing.T) {
	fastBackoff(t)
	p := newProxy(t, nil)
	c := openTest(t, func(cfg *driver.Config) { cfg.URLs = []string{p.url("amqp")} })
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	p.pause() // confirms held back
	errs := make(chan error, 10)
	for i := range 10 {
		go func() { errs <- c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: fmt.Sprint(i)}) }()
	}
	testenv.Eventually(t, "publishes outstanding", func() bool { return c.permits.held() == 10 })
	p.cut()
	for range 10 {
		err := <-errs
		if !errors.Is(err, driver.ErrLost) || errors.Is(err, driver.ErrNacked) {
			t.Errorf("publish whose connection died: %v", err)
		}
	}
	// And the connection comes back.
	if err := c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: "later"}); err != nil {
		t.Fatal(err)
	}
}

func TestPublishWaitsForRecoveryWithinContext(t *testing.T) {
	p := newProxy(t, nil)
	old := backoffBase
	backoffBase = 2 * time.Second
	t.Cleanup(func() { backoffBase = old })
	var log eventLog
	c := openTest(t, func(cfg *driver.Config) {
		cfg.URLs = []string{p.url("amqp")}
		cfg.OnEvent = log.add
		cfg.ConfirmTimeout = 100 * time.Millisecond // does not apply to the wait for recovery
	})
	p.cut()
	testenv.Eventually(t, "lost", func() bool { return log.count(driver.EventLost) > 0 })
	ctx, cancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	defer cancel()
	err := c.Publish(ctx, driver.Message{RoutingKey: "x"})
	if !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("publish while down with a short context: %v", err)
	}
	if err := c.Ping(context.Background()); err == nil {
		t.Fatal("Ping succeeded while down")
	}
	ctx2 := ctxFor(t, 20*time.Second)
	q := uniqueName("q")
	if _, err := c.DeclareQueue(ctx2, driver.Queue{Name: q}); err != nil { // waits for recovery
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteQueue(t, q) })
	if err := c.Publish(ctx2, driver.Message{RoutingKey: q}); err != nil {
		t.Fatal(err)
	}
}

func TestCloseWhileReconnecting(t *testing.T) {
	p := newProxy(t, nil)
	var log eventLog
	cfg := driver.Config{URLs: []string{p.url("amqp")}, OnEvent: log.add}
	c, err := open(ctxFor(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	_ = p.ln.Close() // nothing to reconnect to
	p.cut()
	testenv.Eventually(t, "retrying", func() bool { return log.count(driver.EventRetrying) > 0 })
	done := make(chan struct{})
	go func() { _ = c.Close(); close(done) }()
	select {
	case <-done:
	case <-time.After(5 * time.Second):
		t.Fatal("Close hangs while reconnecting")
	}
	if err := c.Publish(context.Background(), driver.Message{}); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("publish after Close: %v", err)
	}
}

func recvOne(t testing.TB, sub driver.Subscription) driver.Delivery {
	t.Helper()
	select {
	case d, ok := <-sub.Deliveries():
		if !ok {
			t.Fatal("Deliveries closed")
		}
		return d
	case <-time.After(20 * time.Second):
		t.Fatal("no delivery within 20s")
	}
	panic("unreachable")
}
