package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/acemq/acemq/driver"
)

// Subscriptions: prefetch, Cancel and Close, closing the connection,
// round-robin between subscriptions.

func testPrefetch(e *env) {
	t := e.t
	q := e.simpleQueue("prefetch")
	for i := range 5 {
		e.publish(e.admin, driver.Message{RoutingKey: q, Body: fmt.Appendf(nil, "%d", i)})
	}
	s := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 2})
	first := e.recv(s)
	e.recv(s)
	e.noRecv(s, "prefetch 2 with two unacknowledged")
	if err := first.Ack(); err != nil {
		t.Fatalf("ack: %v", err)
	}
	third := e.recv(s)
	if string(third.Body) != "2" {
		t.Errorf("after one ack got %q, want %q", third.Body, "2")
	}
	e.noRecv(s, "prefetch 2 with two unacknowledged again")
}

func testCancel(e *env) {
	t := e.t
	q := e.simpleQueue("cancel")
	for i := range 3 {
		e.publish(e.admin, driver.Message{RoutingKey: q, Body: fmt.Appendf(nil, "%d", i)})
	}
	s := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 1})
	d := e.recv(s)
	if err := s.Cancel(e.ctx); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if extra := e.drainUntilClosed(s); len(extra) != 0 {
		t.Errorf("prefetch 1 with one unacknowledged, yet %d more arrived after Cancel", len(extra))
	}
	if err := d.Ack(); err != nil {
		t.Fatalf("ack after Cancel: %v", err)
	}
	e.eventuallyMessages(e.admin, q, 2)
	if err := s.Close(); err != nil {
		t.Errorf("close after Cancel: %v", err)
	}
	if got := e.takeAll(e.admin, q, 2); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("left on the queue: %v", got)
	}
}

func testCloseRequeues(e *env) {
	t := e.t
	q := e.simpleQueue("close")
	e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("a")})
	e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("b")})
	s := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 2})
	d1, d2 := e.recv(s), e.recv(s)
	if err := d2.Ack(); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	e.drainUntilClosed(s)
	if err := d1.Ack(); !errors.Is(err, driver.ErrChannelClosed) {
		t.Errorf("ack after Close = %v, want driver.ErrChannelClosed", err)
	}
	d := e.get(e.admin, q)
	if string(d.Body) != string(d1.Body) || !d.Redelivered {
		t.Errorf("after Close got %q redelivered=%v, want %q redelivered", d.Body, d.Redelivered, d1.Body)
	}
	_ = d.Ack()
	e.expectEmpty(e.admin, q)
}

func testConnClose(e *env) {
	t := e.t
	q := e.simpleQueue("connclose")
	e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("x")})
	c := e.conn()
	s := e.consume(c, driver.ConsumeSpec{Queue: q})
	d := e.recv(s)
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	e.drainUntilClosed(s)
	if err := d.Ack(); !errors.Is(err, driver.ErrChannelClosed) {
		t.Errorf("ack after the connection closed = %v, want driver.ErrChannelClosed", err)
	}
	if err := c.Publish(e.ctx, driver.Message{RoutingKey: q}); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("publish on a closed connection = %v, want driver.ErrClosed", err)
	}
	if _, err := c.DeclareQueue(e.ctx, driver.Queue{Name: q, Durable: true}); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("declare on a closed connection = %v, want driver.ErrClosed", err)
	}
	back := e.get(e.admin, q)
	if !back.Redelivered {
		t.Error("a delivery unsettled at connection close came back without the redelivered flag")
	}
	_ = back.Ack()
}

// testCloseAfterAbandonedCancel checks what driver.Subscription.Close and
// driver.Conn.Close promise about a Cancel whose context ended before the
// broker answered: a Close that follows it returns, and so does a Close in
// progress when the connection closes. A hang here would hang every
// consumer's shutdown in package acemq.
func testCloseAfterAbandonedCancel(e *env) {
	t := e.t
	q := e.simpleQueue("abandoned")
	closed := func(what string, fn func() error) {
		t.Helper()
		done := make(chan struct{})
		go func() { _ = fn(); close(done) }()
		select {
		case <-done:
		case <-time.After(3 * waitFor): // a hang guard, well past any bounded wait of a driver
			t.Fatalf("%s did not return", what)
		}
	}
	c := e.conn()
	for i := range 20 {
		s := e.consume(c, driver.ConsumeSpec{Queue: q})
		ctx, cancel := context.WithTimeout(e.ctx, time.Duration(i)*time.Microsecond)
		_ = s.Cancel(ctx) // it may give up before the broker answers
		cancel()
		closed(fmt.Sprintf("round %d: Subscription.Close after a Cancel whose context ended", i), s.Close)
	}
	c2 := e.conn()
	s := e.consume(c2, driver.ConsumeSpec{Queue: q})
	ctx, cancel := context.WithTimeout(e.ctx, time.Microsecond)
	_ = s.Cancel(ctx)
	cancel()
	subClosed := make(chan struct{})
	go func() { _ = s.Close(); close(subClosed) }()
	closed("Conn.Close with a Subscription.Close in progress", c2.Close)
	select {
	case <-subClosed:
	case <-time.After(3 * waitFor):
		t.Fatal("Subscription.Close in progress did not return once the connection closed")
	}
}

func testRoundRobin(e *env) {
	t := e.t
	q := e.simpleQueue("roundrobin")
	s1 := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 1})
	s2 := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 1})
	// Consume has returned for both, so both are subscribed; an Inspector
	// can confirm it.
	if e.canCount(e.admin, "two consumers on the queue") {
		e.eventually("two consumers on the queue", func() bool { return e.info(e.admin, q).Consumers == 2 })
	}
	const n = 10
	for i := range n {
		e.publish(e.admin, driver.Message{RoutingKey: q, Body: fmt.Appendf(nil, "%02d", i)})
	}
	counts := map[string]int{}
	seen := map[string]bool{}
	deadline := time.After(waitFor)
	for len(seen) < n {
		var d driver.Delivery
		var ok bool
		var who string
		select {
		case d, ok = <-s1.Deliveries():
			who = "first"
		case d, ok = <-s2.Deliveries():
			who = "second"
		case <-deadline:
			t.Fatalf("only %d of %d messages arrived", len(seen), n)
		}
		if !ok {
			t.Fatalf("the %s subscription's channel closed", who)
		}
		if seen[string(d.Body)] {
			t.Fatalf("message %q delivered twice", d.Body)
		}
		seen[string(d.Body)] = true
		counts[who]++
		if err := d.Ack(); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	if counts["first"] == 0 || counts["second"] == 0 {
		t.Errorf("deliveries per subscription %v: want both to get some", counts)
	}
}
