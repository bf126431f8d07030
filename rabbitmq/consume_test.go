package rabbitmq

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
)

func publishN(t testing.TB, c driver.BatchPublisher, q string, n int) {
	t.Helper()
	ms := make([]driver.Message, n)
	for i := range ms {
		ms[i] = driver.Message{RoutingKey: q, Mandatory: true, MessageID: fmt.Sprint(i)}
	}
	for i, err := range c.PublishBatch(ctxFor(t, 30*time.Second), ms) {
		if err != nil {
			t.Fatalf("publish %d: %v", i, err)
		}
	}
}

func TestCancelKeepsDeliveriesSettleable(t *testing.T) {
	c := openTest(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	publishN(t, c, q, 3)
	sub, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q, Prefetch: 1})
	if err != nil {
		t.Fatal(err)
	}
	d := recvOne(t, sub)
	if err := sub.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	// Deliveries closes once what was received is handed up.
	for range sub.Deliveries() {
	}
	if err := d.Ack(); err != nil {
		t.Fatalf("ack after Cancel: %v", err)
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	testenv.Eventually(t, "2 messages left", func() bool {
		info, err := c.InspectQueue(ctx, q)
		return err == nil && info.Messages == 2 && info.Consumers == 0
	})
}

func TestCloseRequeuesUnsettled(t *testing.T) {
	c := openTest(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	publishN(t, c, q, 1)
	sub, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q, Prefetch: 10})
	if err != nil {
		t.Fatal(err)
	}
	d := recvOne(t, sub)
	if !d.CanSettle() {
		t.Fatal("a delivery on an open channel says it cannot be settled")
	}
	if err := sub.Close(); err != nil {
		t.Fatal(err)
	}
	if d.CanSettle() {
		t.Error("a delivery whose channel was closed says it can still be settled")
	}
	if err := d.Ack(); !errors.Is(err, driver.ErrChannelClosed) {
		t.Fatalf("ack after Close: %v", err)
	}
	got, ok, err := c.Get(ctx, q)
	if err != nil || !ok || !got.Redelivered {
		t.Fatalf("Get after Close = %+v, %v, %v", got, ok, err)
	}
	_ = got.Ack()
}

func TestDeletedQueueEndsSubscription(t *testing.T) {
	c := openTest(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	sub, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := c.DeleteQueue(ctx, q); err != nil {
		t.Fatal(err)
	}
	select {
	case _, ok := <-sub.Deliveries():
		if ok {
			t.Fatal("unexpected delivery")
		}
	case <-time.After(10 * time.Second):
		t.Fatal("Deliveries did not close when the queue was deleted")
	}
	_ = sub.Close()
	if _, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q}); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("consume from a missing queue: %v", err)
	}
}

func TestConnCloseClosesDeliveries(t *testing.T) {
	cfg := driver.Config{URLs: []string{testenv.AMQPURL(t)}}
	c, err := open(ctxFor(t, 10*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	var subs []driver.Subscription
	for range 3 {
		s, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q})
		if err != nil {
			t.Fatal(err)
		}
		subs = append(subs, s)
	}
	publishN(t, c, q, 10) // some deliveries stay unread
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	for _, s := range subs {
		for range s.Deliveries() {
		}
	}
	if err := c.Ping(ctx); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("Ping after Close: %v", err)
	}
	if _, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q}); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("Consume after Close: %v", err)
	}
}

func TestExclusiveConsumerRefused(t *testing.T) {
	c := openTest(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	sub, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q, Exclusive: true})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	_, err = c.Consume(ctx, driver.ConsumeSpec{Queue: q})
	var ae *driver.AccessError
	if !errors.As(err, &ae) || ae.Code != 403 {
		t.Fatalf("second consumer on an exclusively consumed queue: %v", err)
	}
}
