package rabbitmq

import (
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
)

// Several goroutines calling Receive at once, as the acemq consumer's
// workers do, keep receiving across the loss of the subscription's channel
// (a channel error: a delivery acknowledged twice) and across the loss of
// the connection: the first reader to see the channel gone resubscribes,
// the others wait for it, and every message published afterwards arrives.
// After Cancel every reader returns.
func TestReceiveAcrossChannelAndConnectionLoss(t *testing.T) {
	fastBackoff(t)
	p := newProxy(t, nil)
	c := openTest(t, func(cfg *driver.Config) { cfg.URLs = []string{p.url("amqp")} })
	admin := openTest(t, nil)
	ctx := ctxFor(t, 60*time.Second)
	q := tempQueue(t, admin, driver.Queue{Name: uniqueName("receive"), Durable: true})
	sub, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q, Prefetch: 10})
	if err != nil {
		t.Fatal(err)
	}
	defer sub.Close()
	r := sub.(driver.Receiver)

	var (
		mu        sync.Mutex
		seen      = map[string]bool{}
		doubleAck = make(chan driver.Delivery, 1)
		wg        sync.WaitGroup
	)
	for range 4 {
		wg.Go(func() {
			for {
				d, ok := r.Receive()
				if !ok {
					return
				}
				mu.Lock()
				seen[d.MessageID] = true
				mu.Unlock()
				_ = d.Ack() // fails for deliveries of a lost channel; they come again
				if d.MessageID == "poison" {
					select {
					case doubleAck <- d:
					default: // seen again: the test already has it
					}
				}
			}
		})
	}
	publish := func(ids ...string) {
		t.Helper()
		for _, id := range ids {
			if err := admin.Publish(ctx, driver.Message{RoutingKey: q, Mandatory: true, MessageID: id}); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitSeen := func(what string, ids ...string) {
		t.Helper()
		testenv.Eventually(t, what, func() bool {
			mu.Lock()
			defer mu.Unlock()
			for _, id := range ids {
				if !seen[id] {
					return false
				}
			}
			return true
		})
	}
	batch := func(prefix string) []string {
		ids := make([]string, 20)
		for i := range ids {
			ids[i] = fmt.Sprintf("%s-%d", prefix, i)
		}
		return ids
	}

	publish(batch("first")...)
	waitSeen("the first batch", batch("first")...)

	// Acknowledging a delivery twice makes the broker close the channel
	// (PRECONDITION_FAILED, unknown delivery tag).
	publish("poison")
	d := <-doubleAck
	_ = d.Ack()
	testenv.Eventually(t, "the channel closed", func() bool { return !d.CanSettle() })
	publish(batch("second")...)
	waitSeen("the batch after the channel loss", batch("second")...)

	p.cut()
	publish(batch("third")...)
	waitSeen("the batch after the connection loss", batch("third")...)

	if err := sub.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatal("readers still in Receive 10s after Cancel")
	}
}
