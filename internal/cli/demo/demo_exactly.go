package demo

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/inbox"
	"github.com/acemq/acemq/outbox"
)

// payment is the exactly-once step's payload.
type payment struct {
	Order  string `json:"order"`
	Amount string `json:"amount"`
}

// exactlyOnceStep records payments through a transactional outbox, has the
// relay publish every record twice (as a relay that crashed after the
// confirms and before deleting its batch would), and consumes them through
// an idempotent consumer: each payment takes effect once, the copies are
// settled as duplicates.
func (d *demo) exactlyOnceStep(ctx context.Context) {
	const promise = "record 3 payments in an outbox, relay them twice as after a relay crash, apply each once through an inbox"
	d.say("step 6: payments — %s", promise)
	q := "acemq-demo-" + d.sfx + ".payments"
	if err := d.declareQueue(ctx, q); err != nil {
		d.step("exactly-once", promise, err, "")
		return
	}
	var mu sync.Mutex
	applied := map[string]int{} // order → times its effect was applied
	in := inbox.New(inbox.NewMemory(), "ledger")
	c, err := acemq.Consume(ctx, d.conn, q, inbox.Wrap(in, func(_ context.Context, m acemq.Message[payment]) acemq.Ack {
		mu.Lock()
		applied[m.Payload.Order]++
		mu.Unlock()
		d.narrate("apply", "payment "+m.Payload.Order, m.Envelope)
		return acemq.Accept()
	}), acemq.WithDrainTimeout(5*time.Second))
	if err != nil {
		d.step("exactly-once", promise, err, "")
		return
	}
	d.closeAtEnd(c.Close)

	// In an application the store is sqlstore's and Send takes the
	// transaction of the order's own writes; the memory store joins none.
	store := outbox.NewMemory()
	if err := d.recordPayments(ctx, store, q); err != nil {
		d.step("exactly-once", promise, err, "")
		return
	}
	first, second, err := d.relayTwice(ctx, store)
	if err == nil {
		err = waitFor(ctx, "6 payment deliveries", func() bool {
			return d.count(q, acemq.OutcomeAcked)+d.count(q, acemq.OutcomeDuplicate) >= 6
		})
	}
	mu.Lock()
	effects, once := 0, true
	for _, n := range applied {
		effects += n
		once = once && n == 1
	}
	orders := len(applied)
	mu.Unlock()
	if err == nil && (orders != 3 || !once) {
		err = fmt.Errorf("payments applied %v, want each of 3 exactly once", applied)
	}
	d.step("exactly-once", promise, err, fmt.Sprintf("%d publishes of 3 records; %d effects applied, %d duplicates recognised by the inbox",
		first+second, effects, d.count(q, acemq.OutcomeDuplicate)))
}

// recordPayments records three payments to q in the outbox store.
func (d *demo) recordPayments(ctx context.Context, store *outbox.Memory, q string) error {
	pub := outbox.NewPublisher[payment](store, "")
	for i, amount := range []string{"12.50", "7.00", "99.90"} {
		p := payment{Order: fmt.Sprintf("PAY-%d", i+1), Amount: amount}
		env, err := pub.Send(ctx, nil, q, p, outbox.WithEnvelope(acemq.MustEnvelope(acemq.Fields{Type: "payment.taken"})))
		if err != nil {
			return err
		}
		d.narrate("record", "payment "+p.Order, env)
	}
	return nil
}

// relayTwice relays the store's records, then puts them back and relays
// them again, as a relay killed between its confirms and its commit would.
func (d *demo) relayTwice(ctx context.Context, store *outbox.Memory) (first, second int, err error) {
	relay := outbox.NewRelay(d.conn, store)
	var recs []outbox.Record
	// Keep copies of the records to put them back after the first relay
	// pass: what a relay killed between its confirms and its commit leaves.
	_, err = store.Relay(ctx, time.Now(), 100, func(batch []outbox.Record) []outbox.Result {
		recs = append(recs, batch...)
		return make([]outbox.Result, len(batch)) // not tried: left as they were
	})
	if err == nil {
		first, err = relay.Flush(ctx)
	}
	if err == nil {
		err = store.Add(ctx, nil, recs...)
	}
	if err == nil {
		d.say("  the relay published %d records; it 'crashed' before deleting them, so they are relayed again", first)
		second, err = relay.Flush(ctx)
	}
	return first, second, err
}
