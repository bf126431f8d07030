package rabbitmq

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
)

func TestRegistered(t *testing.T) {
	for _, u := range []string{"amqp://h/", "amqps://h/"} {
		d, err := driver.Lookup(u)
		if err != nil {
			t.Fatal(err)
		}
		if _, ok := d.(Driver); !ok {
			t.Fatalf("%s: got %T", u, d)
		}
	}
}

func TestPublishConsumeRoundTrip(t *testing.T) {
	c := openTest(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{Durable: true})

	headers := driver.Table{
		"s":      "text",
		"n":      int64(42),
		"nested": driver.Table{"a": int32(1), "d": driver.Decimal{Scale: 2, Value: 314}},
		"arr":    []any{"x", driver.Table{"k": true}},
	}
	err := c.Publish(ctx, driver.Message{
		RoutingKey: q, Mandatory: true, ContentType: "application/json",
		MessageID: "m1", CorrelationID: "c1", ReplyTo: "r1",
		Headers: headers, Body: []byte(`{"a":1}`),
	})
	if err != nil {
		t.Fatalf("Publish: %v", err)
	}
	sub, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q, Prefetch: 10})
	if err != nil {
		t.Fatalf("Consume: %v", err)
	}
	defer sub.Close()
	select {
	case d := <-sub.Deliveries():
		if string(d.Body) != `{"a":1}` || d.MessageID != "m1" || d.CorrelationID != "c1" || d.ReplyTo != "r1" ||
			d.ContentType != "application/json" || !d.Persistent || d.RoutingKey != q || d.ConsumerTag != sub.Tag() {
			t.Errorf("delivery = %+v", d)
		}
		nested, ok := d.Headers["nested"].(driver.Table)
		if !ok {
			t.Fatalf("nested header is %T, want driver.Table", d.Headers["nested"])
		}
		if nested["d"] != (driver.Decimal{Scale: 2, Value: 314}) || nested["a"] != int32(1) {
			t.Errorf("nested = %#v", nested)
		}
		arr, _ := d.Headers["arr"].([]any)
		if len(arr) != 2 || arr[0] != "x" {
			t.Errorf("arr = %#v", d.Headers["arr"])
		} else if _, ok := arr[1].(driver.Table); !ok {
			t.Errorf("arr[1] is %T, want driver.Table", arr[1])
		}
		if err := d.Ack(); err != nil {
			t.Errorf("Ack: %v", err)
		}
	case <-ctx.Done():
		t.Fatal("no delivery")
	}
}

func TestGet(t *testing.T) {
	c := openTest(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	if _, ok, err := c.Get(ctx, q); err != nil || ok {
		t.Fatalf("Get on empty queue = %v, %v", ok, err)
	}
	for i := range 2 {
		if err := c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: fmt.Sprint(i), Body: []byte{byte(i)}}); err != nil {
			t.Fatal(err)
		}
	}
	d, ok, err := c.Get(ctx, q)
	if err != nil || !ok || d.MessageID != "0" {
		t.Fatalf("Get = %+v, %v, %v", d, ok, err)
	}
	if err := d.Nack(true); err != nil {
		t.Fatal(err)
	}
	d, ok, err = c.Get(ctx, q)
	if err != nil || !ok || d.MessageID != "0" || !d.Redelivered {
		t.Fatalf("Get after requeue = %+v, %v, %v", d, ok, err)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	info, err := c.InspectQueue(ctx, q)
	if err != nil || info.Messages != 1 {
		t.Fatalf("InspectQueue = %+v, %v", info, err)
	}
	if _, _, err := c.Get(ctx, uniqueName("missing")); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("Get on a missing queue: %v", err)
	}
}

func TestDeclarationErrors(t *testing.T) {
	c := openTest(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{Durable: true})

	_, err := c.DeclareQueue(ctx, driver.Queue{Name: q, Durable: false})
	var pe *driver.PreconditionError
	if !errors.As(err, &pe) || pe.Kind != "queue" || pe.Name != q {
		t.Fatalf("redeclare with different durability: %v", err)
	}
	t.Logf("precondition detail: %s", pe.Detail)
	if _, err := c.InspectQueue(ctx, uniqueName("missing")); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("InspectQueue missing: %v", err)
	}
	if err := c.InspectExchange(ctx, uniqueName("missing")); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("InspectExchange missing: %v", err)
	}
	if err := c.InspectExchange(ctx, "amq.direct"); err != nil {
		t.Fatalf("InspectExchange amq.direct: %v", err)
	}
	// A different connection cannot use another's exclusive queue.
	excl := tempQueue(t, c, driver.Queue{Exclusive: true})
	other := openTest(t, nil)
	_, err = other.DeclareQueue(ctx, driver.Queue{Name: excl, Exclusive: true})
	var ae *driver.AccessError
	if !errors.As(err, &ae) || ae.Code != 405 {
		t.Fatalf("exclusive queue from another connection: %v", err)
	}
	// The connection still works after all those channel errors.
	if err := c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: "x", Mandatory: true}); err != nil {
		t.Fatalf("Publish after channel errors: %v", err)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping: %v", err)
	}
}

func TestCapabilities(t *testing.T) {
	c := openTest(t, nil)
	caps := c.Capabilities()
	if !caps.PublisherConfirms || !caps.DeadLettering || !caps.QuorumQueues || !caps.Streams || !caps.Recovery {
		t.Fatalf("capabilities of RabbitMQ 3.10 = %+v", caps)
	}
}
