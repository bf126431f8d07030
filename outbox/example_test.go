package outbox_test

import (
	"context"
	"fmt"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/inbox"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/topology"
)

type Payment struct {
	Order  string `json:"order"`
	Amount string `json:"amount"`
}

// A payment is recorded in the outbox (with sqlstore, inside the
// application's transaction: pass its *sql.Tx instead of nil), the relay
// publishes it, and a consumer behind an inbox applies it. Published
// twice — as after a relay crash — it still takes effect once.
func Example() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://outbox-example")
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("payments").Apply(ctx, conn); err != nil {
		panic(err)
	}

	applied := make(chan string, 4)
	settled := make(chan acemq.Outcome, 4)
	conn.OnSettle(func(s acemq.Settlement) { settled <- s.Outcome })
	in := inbox.New(inbox.NewMemory(), "ledger")
	consumer, err := acemq.Consume(ctx, conn, "payments", inbox.Wrap(in, func(_ context.Context, m acemq.Message[Payment]) acemq.Ack {
		applied <- m.Payload.Order
		return acemq.Accept()
	}))
	if err != nil {
		panic(err)
	}
	defer consumer.Close(ctx)

	store := outbox.NewMemory() // sqlstore.New(db, sqlstore.Postgres) … .Outbox() in production
	pub := outbox.NewPublisher[Payment](store, "")
	env, err := pub.Send(ctx, nil, "payments", Payment{Order: "PAY-1", Amount: "12.50"})
	if err != nil {
		panic(err)
	}
	relay := outbox.NewRelay(conn, store)
	n, _ := relay.Flush(ctx) // relay.Run(ctx) in a goroutine, in production
	fmt.Println("published:", n, "left in the outbox:", store.Len())
	fmt.Println("applied:", <-applied, <-settled)

	// The same record again, same id: what a relay killed after the
	// confirm and before deleting the record publishes on its restart.
	again := outbox.NewPublisher[Payment](store, "")
	_, _ = again.Send(ctx, nil, "payments", Payment{Order: "PAY-1", Amount: "12.50"}, outbox.WithEnvelope(env))
	_, _ = relay.Flush(ctx)
	fmt.Println("the copy:", <-settled)
	// Output:
	// published: 1 left in the outbox: 0
	// applied: PAY-1 acked
	// the copy: duplicate
}
