package drivertest

import (
	"slices"
	"time"

	"github.com/acemq/acemq/driver"
)

// Settling and dead-lettering: nack and reject with requeue, a quorum
// queue's delivery limit, dead letters on reject
// and on TTL with their x-death headers, the retry rung, per-message
// expiration.

func testNackRequeue(e *env) {
	t := e.t
	q := e.simpleQueue("requeue")
	e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("once")})
	c := e.conn()
	s := e.consume(c, driver.ConsumeSpec{Queue: q, Prefetch: 1})
	d := e.recv(s)
	if d.Redelivered {
		t.Error("first delivery marked redelivered")
	}
	if d.ConsumerTag != s.Tag() {
		t.Errorf("delivery consumer tag %q, subscription tag %q", d.ConsumerTag, s.Tag())
	}
	if err := d.Nack(true); err != nil {
		t.Fatalf("nack with requeue: %v", err)
	}
	d = e.recv(s)
	if string(d.Body) != "once" || !d.Redelivered {
		t.Fatalf("after requeue got %q redelivered=%v, want %q redelivered", d.Body, d.Redelivered, "once")
	}
	if err := d.Ack(); err != nil {
		t.Fatalf("ack: %v", err)
	}
	e.noRecv(s, "the acknowledged message must not come back")
	e.eventuallyMessages(e.admin, q, 0)
}

// dlxSetup declares a dead-letter exchange and a queue bound to it on key.
func (e *env) dlxSetup(key string) (dlx, dlq string) {
	dlx = e.exchange("dlx", driver.Direct)
	dlq = e.simpleQueue("dlq")
	e.bind(dlx, dlq, key)
	return dlx, dlq
}

func testDeadLetterReject(e *env) {
	if !e.caps.DeadLettering {
		e.t.Log("not run: the driver does not report dead-lettering")
		return
	}
	t := e.t
	dlx, dlq := e.dlxSetup("dead")
	src := e.name("reject-src")
	e.queue(e.admin, driver.Queue{Name: src, Durable: true, Args: driver.Table{
		"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "dead",
	}})
	e.publish(e.admin, driver.Message{RoutingKey: src, MessageID: "m-1", Body: []byte("bad"), Headers: driver.Table{"app": "kept"}})
	s := e.consume(e.conn(), driver.ConsumeSpec{Queue: src, Prefetch: 1})
	rejected := e.recv(s)
	if err := rejected.Nack(false); err != nil {
		t.Fatalf("nack without requeue: %v", err)
	}
	d := e.get(e.admin, dlq)
	defer func() { _ = d.Ack() }()
	if string(d.Body) != "bad" || d.MessageID != "m-1" || d.Headers["app"] != "kept" || d.RoutingKey != "dead" {
		t.Errorf("dead letter %+v", d)
	}
	x := e.firstDeath(d)
	if x["reason"] != "rejected" || x["queue"] != src {
		t.Errorf("x-death entry %#v, want reason rejected, queue %q", x, src)
	}
	if n, ok := asInt(x["count"]); !ok || n != 1 {
		t.Errorf("x-death count %#v", x["count"])
	}
	if d.Headers["x-first-death-queue"] != src || d.Headers["x-first-death-reason"] != "rejected" {
		t.Errorf("x-first-death headers %#v", d.Headers)
	}
	e.expectEmpty(e.admin, src)
}

func testTTLDeadLetter(e *env) {
	if !e.caps.DeadLettering {
		e.t.Log("not run: the driver does not report dead-lettering")
		return
	}
	t := e.t
	dlx, dlq := e.dlxSetup("expired")
	src := e.name("ttl-src")
	e.queue(e.admin, driver.Queue{Name: src, Durable: true, Args: driver.Table{
		"x-message-ttl": int32(200), "x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "expired",
	}})
	// Nobody consumes src: the broker must expire the message by itself.
	e.publish(e.admin, driver.Message{RoutingKey: src, Body: []byte("late")})
	d := e.get(e.admin, dlq)
	defer func() { _ = d.Ack() }()
	if string(d.Body) != "late" || d.Exchange != dlx || d.RoutingKey != "expired" {
		t.Errorf("expired message %q via %q/%q", d.Body, d.Exchange, d.RoutingKey)
	}
	x := e.firstDeath(d)
	if x["reason"] != "expired" || x["queue"] != src {
		t.Errorf("x-death entry %#v, want reason expired, queue %q", x, src)
	}
	if keys, ok := x["routing-keys"].([]any); !ok || !slices.Contains(keys, any(src)) {
		t.Errorf("x-death routing-keys %#v, want [%q]", x["routing-keys"], src)
	}
	e.expectEmpty(e.admin, src)
}

func testRetryRung(e *env) {
	if !e.caps.DeadLettering {
		e.t.Log("not run: the driver does not report dead-lettering")
		return
	}
	t := e.t
	// The retry shape of docs/wire.md §5.1: a rung queue with a TTL dead-letters
	// back through the retry exchange to the source queue.
	retry := e.exchange("retry", driver.Direct)
	src := e.simpleQueue("orders")
	e.bind(retry, src, src)
	rung := e.name("orders.retry.200ms")
	e.queue(e.admin, driver.Queue{Name: rung, Durable: true, Args: driver.Table{
		"x-message-ttl": int64(200), "x-dead-letter-exchange": retry, "x-dead-letter-routing-key": src,
	}})
	e.publish(e.admin, driver.Message{RoutingKey: rung, Mandatory: true, MessageID: e.id(), Body: []byte("retry me")})
	d := e.get(e.admin, src)
	defer func() { _ = d.Ack() }()
	if string(d.Body) != "retry me" || d.RoutingKey != src {
		t.Errorf("returned message %q with routing key %q", d.Body, d.RoutingKey)
	}
	if x := e.firstDeath(d); x["reason"] != "expired" || x["queue"] != rung {
		t.Errorf("x-death entry %#v", x)
	}
}

func testPerMessageExpiration(e *env) {
	t := e.t
	plain := e.simpleQueue("exp-plain")
	e.publish(e.admin, driver.Message{RoutingKey: plain, Expiration: "100", Body: []byte("brief")})
	e.waitExpired(e.admin, plain, 100*time.Millisecond, time.Now())
	e.expectEmpty(e.admin, plain)

	if !e.caps.DeadLettering {
		return
	}
	dlx, dlq := e.dlxSetup("msg-expired")
	src := e.name("exp-src")
	e.queue(e.admin, driver.Queue{Name: src, Durable: true, Args: driver.Table{
		"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "msg-expired",
	}})
	e.publish(e.admin, driver.Message{RoutingKey: src, Expiration: "100", Body: []byte("brief")})
	d := e.get(e.admin, dlq)
	defer func() { _ = d.Ack() }()
	if x := e.firstDeath(d); x["reason"] != "expired" || x["queue"] != src {
		t.Errorf("x-death entry %#v", x)
	}
}

// waitExpired waits until the messages published to q before since with a
// time to live of ttl have expired. With an Inspector it polls the count
// of ready messages down to zero; without one there is nothing to poll, so
// it waits out ttl from since with a margin: an expired message must never
// be delivered, so a later subscription or fetch must find nothing.
func (e *env) waitExpired(c driver.Conn, q string, ttl time.Duration, since time.Time) {
	e.t.Helper()
	if _, ok := c.(driver.Inspector); ok {
		e.eventually("the message to expire", func() bool { return e.messages(c, q) == 0 })
		return
	}
	time.Sleep(time.Until(since.Add(ttl + quiet)))
}

func testRejectRequeue(e *env) {
	t := e.t
	q := e.simpleQueue("reject-requeue")
	e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("again")})
	s := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 1})
	d := e.recv(s)
	if err := d.Reject(true); err != nil {
		t.Fatalf("reject with requeue: %v", err)
	}
	d = e.recv(s)
	if string(d.Body) != "again" || !d.Redelivered {
		t.Fatalf("after a requeued reject got %q redelivered=%v, want %q redelivered", d.Body, d.Redelivered, "again")
	}
	// Without requeue, on a queue with no dead-letter exchange, the
	// message is gone.
	if err := d.Reject(false); err != nil {
		t.Fatalf("reject without requeue: %v", err)
	}
	e.noRecv(s, "the rejected message must not come back")
	e.eventuallyMessages(e.admin, q, 0)
}

// testDeliveryLimit: a requeued reject counts toward a quorum queue's
// delivery limit on every broker (a requeued nack does only on some, so it
// is not asserted here): a message rejected once more than the limit is
// dead-lettered with the reason delivery_limit.
func testDeliveryLimit(e *env) {
	if !e.caps.QuorumQueues || !e.caps.DeadLettering {
		e.t.Log("not run: the driver does not report quorum queues and dead-lettering")
		return
	}
	t := e.t
	dlx, dlq := e.dlxSetup("limit")
	src := e.name("limit-src")
	const limit = 2
	e.queue(e.admin, driver.Queue{Name: src, Durable: true, Args: driver.Table{
		"x-queue-type": "quorum", "x-delivery-limit": int32(limit),
		"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "limit",
	}})
	e.publish(e.admin, driver.Message{RoutingKey: src, MessageID: "poison", Body: []byte("fails")})
	s := e.consume(e.conn(), driver.ConsumeSpec{Queue: src, Prefetch: 1})
	for i := range limit + 1 {
		d := e.recv(s)
		if string(d.Body) != "fails" || d.Redelivered != (i > 0) {
			t.Fatalf("delivery %d: %q redelivered=%v", i+1, d.Body, d.Redelivered)
		}
		if i > 0 {
			if n, ok := asInt(d.Headers["x-delivery-count"]); !ok || n != int64(i) {
				t.Errorf("delivery %d: x-delivery-count %#v, want %d", i+1, d.Headers["x-delivery-count"], i)
			}
		}
		if err := d.Reject(true); err != nil {
			t.Fatalf("reject %d with requeue: %v", i+1, err)
		}
	}
	d := e.get(e.admin, dlq)
	defer func() { _ = d.Ack() }()
	if d.MessageID != "poison" || d.Headers["x-first-death-reason"] != "delivery_limit" || d.Headers["x-first-death-queue"] != src {
		t.Errorf("dead letter %q: x-first-death-reason %#v, x-first-death-queue %#v; want delivery_limit from %q",
			d.MessageID, d.Headers["x-first-death-reason"], d.Headers["x-first-death-queue"], src)
	}
	e.noRecv(s, "the dead-lettered message must not come back")
}
