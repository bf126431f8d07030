package drivertest

import (
	"fmt"
	"slices"

	"github.com/acemq/acemq/driver"
)

// testResubscribe: what pausing and resuming a consumer relies on. After
// Cancel, a new subscription with the same tag can start on the same queue
// while the cancelled one still holds an unsettled delivery; the held
// delivery can still be acked; the new subscription receives what arrives
// afterwards; and closing the old one, once its delivery is settled, does
// not disturb the new one.
func testResubscribe(e *env) {
	t := e.t
	q := e.simpleQueue("resubscribe")
	c := e.conn()
	e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("held")})
	spec := driver.ConsumeSpec{Queue: q, Tag: "acemq-" + q, Prefetch: 5}
	old := e.consume(c, spec)
	held := e.recv(old)
	if err := old.Cancel(e.ctx); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if extra := e.drainUntilClosed(old); len(extra) != 0 {
		t.Errorf("%d deliveries after Cancel", len(extra))
	}
	next := e.consume(c, spec)
	for i := range 3 {
		e.publish(e.admin, driver.Message{RoutingKey: q, Body: fmt.Appendf(nil, "%d", i)})
	}
	var got []string
	for range 3 {
		d := e.recv(next)
		if d.ConsumerTag != spec.Tag {
			t.Errorf("the new subscription's delivery has tag %q, want %q", d.ConsumerTag, spec.Tag)
		}
		got = append(got, string(d.Body))
		if err := d.Ack(); err != nil {
			t.Fatalf("ack on the new subscription: %v", err)
		}
	}
	if !slices.Equal(got, []string{"0", "1", "2"}) {
		t.Errorf("the new subscription received %v", got)
	}
	if err := held.Ack(); err != nil {
		t.Fatalf("ack of a delivery of the cancelled subscription: %v", err)
	}
	if err := old.Close(); err != nil {
		t.Errorf("close of the cancelled subscription: %v", err)
	}
	e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("after")})
	if d := e.recv(next); string(d.Body) != "after" {
		t.Errorf("after the old subscription closed, the new one received %q", d.Body)
	} else if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	e.expectEmpty(e.admin, q)
}
