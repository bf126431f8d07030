package drivertest

import (
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/acemq/acemq/driver"
)

// Priority queues and per-message expiry at the head of a queue.

// testPriorityOrder: a queue declared with x-max-priority delivers its
// ready messages highest priority first, first in first out within one
// priority; a priority above the maximum ranks as the maximum but is
// delivered as published; a queue without the argument keeps publish
// order whatever the priorities.
func testPriorityOrder(e *env) {
	t := e.t
	prio := e.queue(e.admin, driver.Queue{Name: e.name("prio"), Durable: true, Args: driver.Table{"x-max-priority": int32(5)}}).Name
	plain := e.simpleQueue("prio-plain")
	published := []uint8{1, 9, 3, 0, 5, 3}
	var sent []string
	for i, p := range published {
		body := fmt.Sprintf("p%d-%d", p, i)
		sent = append(sent, body)
		for _, q := range []string{prio, plain} {
			e.publish(e.admin, driver.Message{RoutingKey: q, Priority: p, MessageID: e.id(), Body: []byte(body)})
		}
	}
	// 9 ranks as 5 and was published before the 5; the two 3s keep their order.
	want := []string{"p9-1", "p5-4", "p3-2", "p3-5", "p1-0", "p0-3"}
	wantPrio := map[string]uint8{}
	for i, b := range sent {
		wantPrio[b] = published[i]
	}
	for _, c := range []struct {
		q    string
		want []string
	}{{prio, want}, {plain, sent}} {
		// A subscription started after the publishes, one delivery at a
		// time, sees the queue's order.
		s := e.consume(e.conn(), driver.ConsumeSpec{Queue: c.q, Prefetch: 1})
		var got []string
		for range c.want {
			d := e.recv(s)
			got = append(got, string(d.Body))
			if d.Priority != wantPrio[string(d.Body)] {
				t.Errorf("queue %q: %s delivered with priority %d, want %d as published", c.q, d.Body, d.Priority, wantPrio[string(d.Body)])
			}
			if err := d.Ack(); err != nil {
				t.Fatalf("ack: %v", err)
			}
		}
		if !slices.Equal(got, c.want) {
			t.Errorf("queue %q delivered %v, want %v", c.q, got, c.want)
		}
	}
}

// testPriorityArguments: x-max-priority is refused on a quorum queue and
// outside 0–255, as RabbitMQ refuses it.
func testPriorityArguments(e *env) {
	t := e.t
	for _, v := range []any{int32(-1), int32(256), "5"} {
		name := e.name("prio-bad")
		e.deleteQueueLater(name)
		var pe *driver.PreconditionError
		if _, err := e.admin.DeclareQueue(e.ctx, driver.Queue{Name: name, Durable: true, Args: driver.Table{"x-max-priority": v}}); !errors.As(err, &pe) {
			t.Errorf("x-max-priority %#v: %v, want *driver.PreconditionError", v, err)
		}
	}
	if !e.caps.QuorumQueues {
		return
	}
	name := e.name("prio-quorum")
	e.deleteQueueLater(name)
	var pe *driver.PreconditionError
	if _, err := e.admin.DeclareQueue(e.ctx, driver.Queue{Name: name, Durable: true, Args: driver.Table{"x-queue-type": "quorum", "x-max-priority": int32(5)}}); !errors.As(err, &pe) {
		t.Errorf("a quorum queue with x-max-priority: %v, want *driver.PreconditionError", err)
	}
}

// testExpirationAtHead: a message's own expiration is acted on only when
// it reaches the head of its queue, as RabbitMQ does: an expired message
// behind one without a time to live stays until the one in front goes,
// and is then dead-lettered with reason expired, never delivered.
func testExpirationAtHead(e *env) {
	if !e.caps.DeadLettering {
		e.t.Log("not run: the driver does not report dead-lettering")
		return
	}
	t := e.t
	dlx, dlq := e.dlxSetup("head-expired")
	src := e.queue(e.admin, driver.Queue{Name: e.name("exp-head"), Durable: true, Args: driver.Table{
		"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "head-expired",
	}}).Name
	e.publish(e.admin, driver.Message{RoutingKey: src, MessageID: e.id(), Body: []byte("front")})
	e.publish(e.admin, driver.Message{RoutingKey: src, MessageID: e.id(), Expiration: "50", Body: []byte("behind")})
	time.Sleep(quiet) // well past the 50 ms
	if e.canCount(e.admin, "the expired message is still behind the head") {
		if n := e.messages(e.admin, dlq); n != 0 {
			t.Errorf("%d messages dead-lettered while the expired one was behind the head", n)
		}
	}
	s := e.consume(e.conn(), driver.ConsumeSpec{Queue: src, Prefetch: 1})
	d := e.recv(s)
	if string(d.Body) != "front" {
		t.Fatalf("first delivery %q, want front", d.Body)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	dead := e.get(e.admin, dlq)
	defer func() { _ = dead.Ack() }()
	if string(dead.Body) != "behind" {
		t.Errorf("dead-lettered %q, want behind", dead.Body)
	}
	if x := e.firstDeath(dead); x["reason"] != "expired" || x["queue"] != src {
		t.Errorf("x-death entry %#v", x)
	}
	e.noRecv(s, "the expired message must not be delivered")
}
