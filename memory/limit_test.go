package memory

import (
	"errors"
	"strings"
	"testing"

	"github.com/acemq/acemq/driver"
)

// quorumWithDLQ declares a quorum queue q dead-lettering into dlq through
// the default exchange, with the given delivery limit (nil: the default).
func quorumWithDLQ(t *testing.T, c *conn, q, dlq string, limit any) {
	t.Helper()
	mustQueue(t, c, driver.Queue{Name: dlq, Durable: true})
	args := driver.Table{"x-queue-type": "quorum", "x-dead-letter-exchange": "", "x-dead-letter-routing-key": dlq}
	if limit != nil {
		args["x-delivery-limit"] = limit
	}
	mustQueue(t, c, driver.Queue{Name: q, Durable: true, Args: args})
}

// A requeued nack is "not processed": RabbitMQ 4.3 does not count it toward
// the delivery limit, and neither does the memory broker. It does count in
// x-acquired-count.
func TestDeliveryLimitNackDoesNotCount(t *testing.T) {
	c := fresh(t)
	quorumWithDLQ(t, c, "q", "q.dlq", int32(1))
	mustPublish(t, c, driver.Message{RoutingKey: "q", Body: []byte("m")})
	for i := range 5 {
		d := mustGet(t, c, "q")
		if i == 0 {
			if _, ok := d.Headers["x-acquired-count"]; ok {
				t.Errorf("first delivery carries x-acquired-count %v", d.Headers["x-acquired-count"])
			}
		} else if d.Headers["x-acquired-count"] != int64(i) {
			t.Errorf("delivery %d: x-acquired-count %#v, want %d", i+1, d.Headers["x-acquired-count"], i)
		}
		if _, ok := d.Headers["x-delivery-count"]; ok {
			t.Errorf("delivery %d after nacks only carries x-delivery-count %v", i+1, d.Headers["x-delivery-count"])
		}
		if err := d.Nack(true); err != nil {
			t.Fatal(err)
		}
	}
	if n := messages(t, c, "q.dlq"); n != 0 {
		t.Fatalf("%d message(s) dead-lettered after requeued nacks; want none", n)
	}
	if n := messages(t, c, "q"); n != 1 {
		t.Fatalf("%d message(s) on the queue; want 1", n)
	}
}

// A subscription that closes with a delivery unsettled returns it as
// failed: it counts, as a consumer that crashes does on RabbitMQ.
func TestDeliveryLimitCountsClosedChannels(t *testing.T) {
	url := newURL(t)
	admin := dial(t, url)
	quorumWithDLQ(t, admin, "q", "q.dlq", int32(2))
	mustPublish(t, admin, driver.Message{RoutingKey: "q", MessageID: "crash", Body: []byte("m")})
	for i := range 3 {
		c := dial(t, url)
		s := mustConsume(t, c, driver.ConsumeSpec{Queue: "q", Prefetch: 1})
		d := recv(t, s)
		if i > 0 && d.Headers["x-delivery-count"] != int64(i) {
			t.Errorf("delivery %d: x-delivery-count %#v, want %d", i+1, d.Headers["x-delivery-count"], i)
		}
		_ = c.Close() // the consumer "crashes"
	}
	d := mustGet(t, admin, "q.dlq")
	if d.MessageID != "crash" || d.Headers["x-first-death-reason"] != "delivery_limit" {
		t.Errorf("dead letter %q with reason %#v; want crash, delivery_limit", d.MessageID, d.Headers["x-first-death-reason"])
	}
	if n := messages(t, admin, "q"); n != 0 {
		t.Errorf("%d message(s) left on the queue", n)
	}
}

// Without x-delivery-limit a quorum queue has RabbitMQ 4's default, 20;
// without a dead-letter exchange the message is then dropped, as RabbitMQ
// drops it. A negative limit means none.
func TestDeliveryLimitDefaultDropsWithoutDLX(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true, Args: driver.Table{"x-queue-type": "quorum"}})
	mustQueue(t, c, driver.Queue{Name: "unlimited", Durable: true, Args: driver.Table{"x-queue-type": "quorum", "x-delivery-limit": int64(-1)}})
	mustQueue(t, c, driver.Queue{Name: "classic", Durable: true})
	for _, q := range []string{"q", "unlimited", "classic"} {
		mustPublish(t, c, driver.Message{RoutingKey: q, Body: []byte(q)})
	}
	for i := range 21 {
		for _, q := range []string{"q", "unlimited", "classic"} {
			d := mustGet(t, c, q)
			if err := d.Reject(true); err != nil {
				t.Fatalf("%s: reject %d: %v", q, i+1, err)
			}
		}
	}
	if n := messages(t, c, "q"); n != 0 {
		t.Errorf("the default-limit quorum queue holds %d message(s) after 21 rejects; want it dropped", n)
	}
	for _, q := range []string{"unlimited", "classic"} {
		if n := messages(t, c, q); n != 1 {
			t.Errorf("%s holds %d message(s) after 21 rejects; want 1", q, n)
		}
	}
}

// x-delivery-limit belongs to quorum queues; the memory broker refuses it
// elsewhere rather than ignore it.
func TestDeliveryLimitQuorumOnly(t *testing.T) {
	c := fresh(t)
	_, err := c.DeclareQueue(ctx, driver.Queue{Name: "c", Durable: true, Args: driver.Table{"x-delivery-limit": int32(3)}})
	if err == nil || !strings.Contains(err.Error(), "x-delivery-limit") {
		t.Errorf("a classic queue with x-delivery-limit: %v; want it refused", err)
	}
	_, err = c.DeclareQueue(ctx, driver.Queue{Name: "q", Durable: true, Args: driver.Table{"x-queue-type": "quorum", "x-delivery-limit": "3"}})
	var pe *driver.PreconditionError
	if !errors.As(err, &pe) {
		t.Errorf("x-delivery-limit as a string: %v; want a *driver.PreconditionError", err)
	}
}

// A transient queue must be exclusive: RabbitMQ 4 deprecates transient
// non-exclusive queues, and a broker that denies the feature refuses them
// (541); the memory broker refuses them always, so a unit test catches one
// before a broker does. Exclusive transient queues are fine.
func TestTransientNonExclusiveRefused(t *testing.T) {
	c := fresh(t)
	for _, q := range []driver.Queue{{Name: "t"}, {Name: "ta", AutoDelete: true}} {
		_, err := c.DeclareQueue(ctx, q)
		var ae *driver.AccessError
		if !errors.As(err, &ae) || ae.Code != 541 || !strings.Contains(ae.Text, "transient_nonexcl_queues") {
			t.Errorf("declaring %+v: %v; want a 541 naming transient_nonexcl_queues", q, err)
		}
	}
	mustQueue(t, c, driver.Queue{Name: "te", Exclusive: true})
	mustQueue(t, c, driver.Queue{Name: "tea", Exclusive: true, AutoDelete: true})
	mustQueue(t, c, driver.Queue{Name: "da", Durable: true, AutoDelete: true})
}
