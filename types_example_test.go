package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// One consumer for a queue that carries several message types: each type
// is decoded into its own Go type and handled by its own handler; a type
// nobody registered is dead-lettered with a reason naming it.
func ExampleConsumeTypes() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-consume-types")
	if err != nil {
		log.Fatal(err)
	}
	defer memory.Reset("memory://example-consume-types")
	defer conn.Close(ctx)
	settled := make(chan acemq.Settlement, 3)
	conn.OnSettle(func(s acemq.Settlement) { settled <- s })

	type Placed struct {
		ID    string `json:"id"`
		Pence int    `json:"pence"`
	}
	type Cancelled struct {
		ID string `json:"id"`
	}
	consumer, err := acemq.ConsumeTypes(ctx, conn, "orders", []acemq.TypeHandler{
		acemq.HandleType("order.placed", func(ctx context.Context, m acemq.Message[Placed]) acemq.Ack {
			fmt.Println("placed", m.Payload.ID, m.Payload.Pence)
			return acemq.Accept()
		}),
		acemq.HandleType("order.cancelled", func(ctx context.Context, m acemq.Message[Cancelled]) acemq.Ack {
			fmt.Println("cancelled", m.Payload.ID)
			return acemq.Accept()
		}),
	}, acemq.WithTopology(topology.New().
		Exchange("shop", topology.ExchangeTopic).
		Queue("orders", topology.WithDeadLettering(true)).
		Bind("shop", "orders", "order.*")))
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close(ctx)

	// The envelope's type is the routing key a message is sent with,
	// unless the publisher sets another (acemq.Fields.Type).
	if _, err := acemq.NewPublisher[Placed](conn, "shop").Send(ctx, "order.placed", Placed{ID: "o-1", Pence: 1250}); err != nil {
		log.Fatal(err)
	}
	<-settled
	if _, err := acemq.NewPublisher[Cancelled](conn, "shop").Send(ctx, "order.cancelled", Cancelled{ID: "o-1"}); err != nil {
		log.Fatal(err)
	}
	<-settled
	if _, err := acemq.NewPublisher[Cancelled](conn, "shop").Send(ctx, "order.refunded", Cancelled{ID: "o-1"}); err != nil {
		log.Fatal(err)
	}
	s := <-settled
	fmt.Println(s.Outcome, s.Target)
	fmt.Println(s.Reason)
	// Output:
	// placed o-1 1250
	// cancelled o-1
	// rejected orders.dlq
	// the handler reported an unprocessable message: Error: acemq: no handler is registered for type "order.refunded" (registered: "order.cancelled", "order.placed")
}

// A handler for bulk writes: up to 3 messages at once, or what arrived
// within 100 ms. Each message is settled as its own Ack says: here one
// is retried, alone, and the others of its batch are accepted.
func ExampleConsumeBatch() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-consume-batch")
	if err != nil {
		log.Fatal(err)
	}
	defer memory.Reset("memory://example-consume-batch")
	defer conn.Close(ctx)
	settled := make(chan acemq.Settlement, 4)
	conn.OnSettle(func(s acemq.Settlement) { settled <- s })
	if err := topology.New().Queue("readings", topology.WithDeadLettering(true)).Apply(ctx, conn); err != nil {
		log.Fatal(err)
	}
	readings := acemq.NewPublisher[int](conn, "")
	for _, kwh := range []int{10, 20, 30} {
		if _, err := readings.Send(ctx, "readings", kwh); err != nil {
			log.Fatal(err)
		}
	}

	consumer, err := acemq.ConsumeBatch(ctx, conn, "readings", 3, 100*time.Millisecond,
		func(ctx context.Context, ms []acemq.Message[int]) []acemq.Ack {
			acks := make([]acemq.Ack, len(ms)) // the zero Ack accepts
			for i, m := range ms {
				if m.Payload == 20 && m.Envelope.Attempt() == 1 {
					acks[i] = acemq.Retry(errors.New("a lock timed out"))
				}
			}
			return acks
		}, acemq.WithRetry(retry.Fixed(2, 10*time.Millisecond)))
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close(ctx)
	for range 4 {
		s := <-settled
		fmt.Println(s.Outcome, "attempt", s.Envelope.Attempt())
	}
	// Unordered output:
	// acked attempt 1
	// acked attempt 1
	// retried attempt 1
	// acked attempt 2
}
