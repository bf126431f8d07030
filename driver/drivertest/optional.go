package drivertest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/acemq/acemq/driver"
)

// The optional interfaces. Each test runs only when the driver implements
// the interface (see optional in core.go).

// testInspect checks a driver.Inspector: passive checks of queues and
// exchanges that create nothing, not-found errors wrapping
// driver.ErrNotFound, and the ready-message and consumer counts.
func testInspect(e *env, ins driver.Inspector) {
	t := e.t
	q := e.simpleQueue("inspect")
	info, err := ins.InspectQueue(e.ctx, q)
	if err != nil || info.Name != q || info.Messages != 0 || info.Consumers != 0 {
		t.Fatalf("inspect of a new queue = %+v, %v; want %q with no messages or consumers", info, err, q)
	}
	missing := e.name("missing")
	for range 2 { // the first check must not have created it
		if _, err := ins.InspectQueue(e.ctx, missing); !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("inspect of a missing queue = %v, want an error wrapping driver.ErrNotFound", err)
		}
	}
	var re *driver.ReturnError
	if err := e.admin.Publish(e.ctx, driver.Message{RoutingKey: missing, Mandatory: true, MessageID: e.id()}); !errors.As(err, &re) {
		t.Errorf("mandatory publish to a queue only inspected = %v, want *driver.ReturnError", err)
	}
	// A refused declaration leaves the connection able to inspect.
	var pe *driver.PreconditionError
	if _, err := e.admin.DeclareQueue(e.ctx, driver.Queue{Name: q, Durable: false}); !errors.As(err, &pe) {
		t.Fatalf("redeclaring queue %q non-durable = %v, want *driver.PreconditionError", q, err)
	}
	if _, err := ins.InspectQueue(e.ctx, q); err != nil {
		t.Fatalf("inspect queue %q after a refused declaration: %v", q, err)
	}
	named := e.queue(e.admin, driver.Queue{Exclusive: true, AutoDelete: true})
	if info, err := ins.InspectQueue(e.ctx, named.Name); err != nil || info.Name != named.Name {
		t.Errorf("inspect server-named queue %q = %+v, %v", named.Name, info, err)
	}

	// Counts: ready messages only, and consumers.
	for i := range 3 {
		e.publish(e.admin, driver.Message{RoutingKey: q, Body: fmt.Appendf(nil, "%d", i)})
	}
	e.eventually("three ready messages", func() bool { return e.messages(e.admin, q) == 3 })
	s := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 1})
	e.recv(s)
	e.eventually("one consumer and two ready messages (one unacknowledged)", func() bool {
		info := e.info(e.admin, q)
		return info.Consumers == 1 && info.Messages == 2
	})
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	e.eventually("no consumer and three ready messages after Close", func() bool {
		info := e.info(e.admin, q)
		return info.Consumers == 0 && info.Messages == 3
	})

	ex := e.exchange("inspect", driver.Topic)
	if err := ins.InspectExchange(e.ctx, ex); err != nil {
		t.Fatalf("inspect exchange %q: %v", ex, err)
	}
	if err := e.admin.DeclareExchange(e.ctx, driver.Exchange{Name: ex, Kind: driver.Direct, Durable: true}); !errors.As(err, &pe) {
		t.Fatalf("redeclaring exchange %q as direct = %v, want *driver.PreconditionError", ex, err)
	}
	if err := ins.InspectExchange(e.ctx, ex); err != nil {
		t.Fatalf("inspect exchange %q after a refused declaration: %v", ex, err)
	}
	missingEx := e.name("missing-exchange")
	for range 2 {
		if err := ins.InspectExchange(e.ctx, missingEx); !errors.Is(err, driver.ErrNotFound) {
			t.Fatalf("inspect of a missing exchange = %v, want an error wrapping driver.ErrNotFound", err)
		}
	}
	if err := e.admin.Publish(e.ctx, driver.Message{Exchange: missingEx, RoutingKey: "k"}); err == nil {
		t.Errorf("publish to an exchange only inspected succeeded")
	}
}

// testDelete checks a driver.Deleter: DeleteQueue reports the messages the
// queue held, deleting removes a queue with its messages and an exchange
// with its bindings, and deleting what is absent succeeds.
func testDelete(e *env, del driver.Deleter) {
	t := e.t
	q := e.simpleQueue("del")
	for i := range 3 {
		e.publish(e.admin, driver.Message{RoutingKey: q, Body: fmt.Appendf(nil, "%d", i)})
	}
	e.eventuallyMessages(e.admin, q, 3)
	_, inspected := e.admin.(driver.Inspector)
	n, err := del.DeleteQueue(e.ctx, q)
	if err != nil {
		t.Fatalf("delete queue %q: %v", q, err)
	}
	// The count is certain when it was inspected or the publishes confirmed.
	if (inspected || e.caps.PublisherConfirms) && n != 3 {
		t.Errorf("delete queue %q = %d, want 3 (the messages it held)", q, n)
	}
	if !e.queueGone(e.admin, q) {
		t.Fatalf("queue %q still there after DeleteQueue", q)
	}
	if n, err := del.DeleteQueue(e.ctx, q); err != nil || n != 0 {
		t.Fatalf("deleting a deleted queue = %d, %v; want 0, nil", n, err)
	}
	if n, err := del.DeleteQueue(e.ctx, e.name("never-declared")); err != nil || n != 0 {
		t.Fatalf("deleting a queue never declared = %d, %v; want 0, nil", n, err)
	}
	// Declared again, it is a new, empty queue.
	if info, err := e.admin.DeclareQueue(e.ctx, driver.Queue{Name: q, Durable: true}); err != nil || info.Messages != 0 {
		t.Errorf("redeclaring the deleted queue = %+v, %v; want it empty", info, err)
	}

	ex := e.exchange("del", driver.Fanout)
	e.bind(ex, q, "")
	if err := del.DeleteExchange(e.ctx, ex); err != nil {
		t.Fatalf("delete exchange %q: %v", ex, err)
	}
	if !e.exchangeGone(e.admin, ex) {
		t.Fatalf("exchange %q still there after DeleteExchange", ex)
	}
	if err := del.DeleteExchange(e.ctx, ex); err != nil {
		t.Fatalf("deleting a deleted exchange = %v, want nil", err)
	}
	// Declared again, it has none of its old bindings.
	if err := e.admin.DeclareExchange(e.ctx, driver.Exchange{Name: ex, Kind: driver.Fanout, Durable: true}); err != nil {
		t.Fatalf("redeclaring the deleted exchange: %v", err)
	}
	var re *driver.ReturnError
	if err := e.admin.Publish(e.ctx, driver.Message{Exchange: ex, Mandatory: true, MessageID: e.id()}); !errors.As(err, &re) {
		t.Errorf("mandatory publish to the redeclared exchange = %v, want *driver.ReturnError (its bindings went with it)", err)
	}
	e.expectEmpty(e.admin, q)
}

// pings is how many times testPing pings in a row: more than the 2047
// channels RabbitMQ allows a connection by default, so a driver that left
// a channel behind on each ping would run out.
const pings = 2100

// testPing checks a driver.Pinger: Ping answers within its context, leaves
// nothing behind, still answers after a refused declaration, and fails on
// a closed connection or with a context that is already done.
func testPing(e *env, p driver.Pinger) {
	t := e.t
	ctx, cancel := context.WithTimeout(e.ctx, waitFor)
	defer cancel()
	if err := p.Ping(ctx); err != nil {
		t.Fatalf("ping: %v", err)
	}
	for i := range pings {
		if err := p.Ping(e.ctx); err != nil {
			t.Fatalf("ping %d of %d in a row: %v", i+1, pings, err)
		}
	}
	// The pings left nothing in the way of the connection's work.
	q := e.simpleQueue("ping")
	e.publish(e.admin, driver.Message{RoutingKey: q, Mandatory: true, MessageID: e.id(), Body: []byte("after pings")})
	if got := e.takeAll(e.admin, q, 1); !slices.Equal(got, []string{"after pings"}) {
		t.Errorf("after %d pings the queue got %v", pings, got)
	}
	var pe *driver.PreconditionError
	if _, err := e.admin.DeclareQueue(e.ctx, driver.Queue{Name: q, Durable: false}); !errors.As(err, &pe) {
		t.Fatalf("redeclaring queue %q non-durable = %v, want *driver.PreconditionError", q, err)
	}
	// Each ping is given waitFor of its own: the first one's context has
	// been running through 2,100 pings and a queue's round trip, which on a
	// loaded machine (seen against RabbitMQ 4.3, under -race) outlast it.
	after, cancelAfter := context.WithTimeout(e.ctx, waitFor)
	defer cancelAfter()
	if err := p.Ping(after); err != nil {
		t.Fatalf("ping after a refused declaration: %v", err)
	}
	done, stop := context.WithCancel(e.ctx)
	stop()
	if err := p.Ping(done); err == nil {
		t.Error("ping with a context already done succeeded")
	}
	c := e.conn()
	pc := as[driver.Pinger](e, c)
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	if err := pc.Ping(after); err == nil {
		t.Error("ping on a closed connection succeeded")
	}
}

// testBlocked checks a driver.BlockReporter: a fresh connection is not
// blocked and gives no reason.
func testBlocked(e *env, b driver.BlockReporter) {
	for _, r := range []driver.BlockReporter{b, as[driver.BlockReporter](e, e.conn())} {
		if blocked, reason := r.Blocked(); blocked || reason != "" {
			e.t.Errorf("a fresh connection reports blocked=%v, reason %q; want false and no reason", blocked, reason)
		}
	}
}

// testCapabilities checks a driver.CapabilityReporter: it reports
// publisher confirms and dead-lettering, which every driver of this
// project has, and every connection to the broker reports the same.
func testCapabilities(e *env, r driver.CapabilityReporter) {
	t := e.t
	caps := r.Capabilities()
	t.Logf("capabilities: %+v", caps)
	if !caps.PublisherConfirms {
		t.Error("the driver does not report publisher confirms")
	}
	if !caps.DeadLettering {
		t.Error("the driver does not report dead-lettering")
	}
	if again := r.Capabilities(); again != caps {
		t.Errorf("asked again the connection reports %+v, first %+v", again, caps)
	}
	if other := as[driver.CapabilityReporter](e, e.conn()).Capabilities(); other != caps {
		t.Errorf("another connection reports %+v, this one %+v", other, caps)
	}
}

// testGet checks a driver.Getter: an empty queue, a fetched message that is
// requeued and fetched again redelivered, a missing queue.
func testGet(e *env, g driver.Getter) {
	t := e.t
	q := e.simpleQueue("get")
	if _, ok, err := g.Get(e.ctx, q); ok || err != nil {
		t.Fatalf("get from an empty queue = ok %v, err %v; want false, nil", ok, err)
	}
	e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("one")})
	d := e.get(e.admin, q)
	if string(d.Body) != "one" || d.Redelivered || d.ConsumerTag != "" {
		t.Errorf("get = %+v", d)
	}
	if err := d.Nack(true); err != nil {
		t.Fatalf("nack with requeue: %v", err)
	}
	d = e.get(e.admin, q)
	if string(d.Body) != "one" || !d.Redelivered {
		t.Errorf("after requeue got %q redelivered=%v", d.Body, d.Redelivered)
	}
	if err := d.Ack(); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if _, ok, err := g.Get(e.ctx, q); ok || err != nil {
		t.Fatalf("get after ack = ok %v, err %v; want false, nil", ok, err)
	}
	if _, _, err := g.Get(e.ctx, e.name("missing")); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("get from a missing queue = %v, want driver.ErrNotFound", err)
	}
}

// testPublishBatch checks a driver.BatchPublisher: one error per message,
// in order, a return among confirms.
func testPublishBatch(e *env, bp driver.BatchPublisher) {
	t := e.t
	q := e.simpleQueue("batch")
	ms := []driver.Message{
		{RoutingKey: q, Body: []byte("a")},
		{RoutingKey: e.name("nobody"), Mandatory: true, MessageID: e.id(), Body: []byte("lost")},
		{RoutingKey: q, Body: []byte("b")},
	}
	errs := bp.PublishBatch(e.ctx, ms)
	if len(errs) != len(ms) {
		t.Fatalf("PublishBatch returned %d errors for %d messages", len(errs), len(ms))
	}
	var re *driver.ReturnError
	if errs[0] != nil || !errors.As(errs[1], &re) || errs[2] != nil {
		t.Fatalf("PublishBatch errors = %v, want [nil, *ReturnError, nil]", errs)
	}
	if got := e.takeAll(e.admin, q, 2); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("batch delivered %v", got)
	}
}

// testPublishEach checks a driver.EachPublisher: every pair the sequence
// yields is reported once, in order, never before it was yielded; a
// yielded error is reported and nothing is published for it; a return is
// reported among confirms; the driver is done with a yielded *Message when
// it asks for the next (the test yields one Message, rewritten each time);
// a sequence longer than the connection's default window of 1,000 does not
// stall; an empty sequence reports nothing; and when ctx ends the driver
// stops taking messages.
func testPublishEach(e *env, ep driver.EachPublisher) {
	t := e.t
	q := e.simpleQueue("each")
	refused := errors.New("this message could not be made")
	steps := []driver.Message{
		{RoutingKey: q, Body: []byte("a")},
		{RoutingKey: e.name("nobody"), Mandatory: true, MessageID: e.id(), Body: []byte("lost")},
		{}, // yielded as an error
		{RoutingKey: q, Body: []byte("b")},
	}
	var events []string
	var errs []error
	var m driver.Message
	ep.PublishEach(e.ctx, func(yield func(*driver.Message, error) bool) {
		for i, s := range steps {
			events = append(events, fmt.Sprint("yield ", i))
			if i == 2 {
				if !yield(nil, refused) {
					return
				}
				continue
			}
			m = s // the same Message every time: the driver must be done with it
			if !yield(&m, nil) {
				return
			}
			m = driver.Message{RoutingKey: q, Body: []byte("overwritten")}
		}
	}, func(err error) {
		events = append(events, fmt.Sprint("done ", len(errs)))
		errs = append(errs, err)
	})
	if len(errs) != len(steps) {
		t.Fatalf("PublishEach reported %d results for %d messages (%v)", len(errs), len(steps), events)
	}
	for i := range steps {
		y, d := slices.Index(events, fmt.Sprint("yield ", i)), slices.Index(events, fmt.Sprint("done ", i))
		if y < 0 || d < y {
			t.Fatalf("message %d was reported before it was yielded: %v", i, events)
		}
	}
	var re *driver.ReturnError
	if errs[0] != nil || !errors.As(errs[1], &re) || errs[2] != refused || errs[3] != nil {
		t.Fatalf("PublishEach results = %v, want [nil, *ReturnError, the yielded error, nil]", errs)
	}
	if got := e.takeAll(e.admin, q, 2); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("the sequence delivered %v", got)
	}

	// Longer than the default window of 1,000: the window slides.
	const long = 1200
	reported, failed := 0, 0
	ep.PublishEach(e.ctx, func(yield func(*driver.Message, error) bool) {
		for range long {
			m = driver.Message{RoutingKey: q, Body: []byte("x")}
			if !yield(&m, nil) {
				return
			}
		}
	}, func(err error) {
		reported++
		if err != nil {
			failed++
		}
	})
	if reported != long || failed != 0 {
		t.Fatalf("a sequence of %d: %d reported, %d failed", long, reported, failed)
	}
	e.eventuallyMessages(e.admin, q, long)

	ep.PublishEach(e.ctx, func(func(*driver.Message, error) bool) {}, func(error) {
		t.Error("done called for an empty sequence")
	})

	// ctx ends after the third message: the driver stops taking messages.
	q2 := e.simpleQueue("each-cancel")
	ctx, cancel := context.WithCancel(e.ctx)
	defer cancel()
	yielded, stopped := 0, false
	var cerrs []error
	ep.PublishEach(ctx, func(yield func(*driver.Message, error) bool) {
		for i := range 100 {
			if i == 3 {
				cancel()
			}
			yielded++
			m = driver.Message{RoutingKey: q2, Body: []byte("c")}
			if !yield(&m, nil) {
				stopped = true
				return
			}
		}
	}, func(err error) { cerrs = append(cerrs, err) })
	switch {
	case !stopped:
		t.Fatalf("PublishEach took all %d messages after ctx ended", yielded)
	case len(cerrs) != yielded:
		t.Fatalf("%d messages yielded, %d reported", yielded, len(cerrs))
	case !errors.Is(cerrs[len(cerrs)-1], context.Canceled):
		t.Fatalf("the message yielded after ctx ended was reported with %v, want an error wrapping context.Canceled", cerrs[len(cerrs)-1])
	}
	published := 0
	for _, err := range cerrs {
		if err == nil {
			published++
		}
	}
	if published > 3 {
		t.Errorf("%d messages were confirmed, but ctx ended after 3", published)
	}
}

// testUnbind checks a driver.Unbinder: after Unbind nothing routes by the
// binding.
func testUnbind(e *env, u driver.Unbinder) {
	t := e.t
	ex := e.exchange("unbind", driver.Direct)
	q := e.simpleQueue("unbind")
	e.bind(ex, q, "k")
	if err := u.Unbind(e.ctx, driver.Binding{Exchange: ex, Queue: q, RoutingKey: "k"}); err != nil {
		t.Fatalf("unbind: %v", err)
	}
	e.publish(e.admin, driver.Message{Exchange: ex, RoutingKey: "k"})
	e.expectEmpty(e.admin, q)
	var re *driver.ReturnError
	if err := e.admin.Publish(e.ctx, driver.Message{Exchange: ex, RoutingKey: "k", Mandatory: true, MessageID: e.id()}); !errors.As(err, &re) {
		t.Errorf("mandatory publish after unbind = %v, want *driver.ReturnError", err)
	}
}

// testReceive checks a driver.Receiver: readers calling Receive at once
// share the deliveries, each exactly once; after Cancel every reader gets
// false once what was sent has been handed up; a reader blocked on an empty
// queue gets false when the subscription is closed.
func testReceive(e *env) {
	t := e.t
	q := e.simpleQueue("receive")
	s := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 10})
	r, ok := s.(driver.Receiver)
	if !ok {
		e.notRun("driver.Receiver (on its subscriptions)")
		return
	}
	const n, readers = 50, 4
	for i := range n {
		e.publish(e.admin, driver.Message{RoutingKey: q, Body: fmt.Appendf(nil, "%d", i)})
	}
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for range readers {
		wg.Go(func() {
			for {
				d, ok := r.Receive()
				if !ok {
					return
				}
				mu.Lock()
				seen[string(d.Body)]++
				mu.Unlock()
				if err := d.Ack(); err != nil {
					t.Errorf("ack: %v", err)
				}
			}
		})
	}
	e.eventually("every message received", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	})
	if err := s.Cancel(e.ctx); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatalf("Receive still blocked %v after Cancel", waitFor)
	}
	for body, times := range seen {
		if times != 1 {
			t.Errorf("message %s received %d times", body, times)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	e.expectEmpty(e.admin, q)

	// A reader waiting on an empty queue is released by Close.
	s2 := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 1})
	r2 := s2.(driver.Receiver)
	got := make(chan bool, 1)
	go func() {
		_, ok := r2.Receive()
		got <- ok
	}()
	time.Sleep(quiet)
	if err := s2.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	select {
	case ok := <-got:
		if ok {
			t.Error("Receive on an empty, closed subscription returned a delivery")
		}
	case <-time.After(waitFor):
		t.Fatalf("Receive still blocked %v after Close", waitFor)
	}
}

// testPurge checks a driver.Purger: it removes the ready messages and says
// how many; the queue stays and takes new ones; a missing queue is
// ErrNotFound.
func testPurge(e *env, p driver.Purger) {
	t := e.t
	q := e.simpleQueue("purge")
	for range 3 {
		e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("x")})
	}
	n, err := p.PurgeQueue(e.ctx, q)
	if err != nil || n != 3 {
		t.Fatalf("PurgeQueue = %d, %v; want 3, nil", n, err)
	}
	e.expectEmpty(e.admin, q)
	if n, err := p.PurgeQueue(e.ctx, q); err != nil || n != 0 {
		t.Errorf("PurgeQueue of an empty queue = %d, %v; want 0, nil", n, err)
	}
	if _, err := p.PurgeQueue(e.ctx, e.name("purge-missing")); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("PurgeQueue of a missing queue = %v, want ErrNotFound", err)
	}
}

// testList checks a driver.Lister: a declared queue is listed, sorted, with
// its declaration and ready messages; a declared exchange with its kind.
func testList(e *env, l driver.Lister) {
	t := e.t
	q := e.simpleQueue("list")
	ex := e.exchange("list", driver.Topic)
	e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("x")})
	qs, err := l.ListQueues(e.ctx)
	if err != nil {
		t.Fatalf("ListQueues: %v", err)
	}
	found := false
	for i, have := range qs {
		if i > 0 && qs[i-1].Name >= have.Name {
			t.Errorf("ListQueues is not sorted by name: %q before %q", qs[i-1].Name, have.Name)
		}
		if have.Name == q {
			found = true
			if !have.Durable || have.Messages != 1 || have.Consumers != 0 {
				t.Errorf("ListQueues lists %s as %+v, want durable, 1 message, no consumers", q, have)
			}
		}
	}
	if !found {
		t.Errorf("ListQueues does not list %s", q)
	}
	xs, err := l.ListExchanges(e.ctx)
	if err != nil {
		t.Fatalf("ListExchanges: %v", err)
	}
	found = false
	for _, have := range xs {
		if have.Name == "" {
			t.Error("ListExchanges lists the default exchange")
		}
		if have.Name == ex {
			found = true
			if have.Kind != driver.Topic || !have.Durable {
				t.Errorf("ListExchanges lists %s as %+v, want a durable topic exchange", ex, have)
			}
		}
	}
	if !found {
		t.Errorf("ListExchanges does not list %s", ex)
	}
}
