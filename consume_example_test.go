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

func ExampleConsume_retry() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-consume-retry")
	if err != nil {
		log.Fatal(err)
	}
	defer memory.Reset("memory://example-consume-retry")
	defer conn.Close(ctx)

	// Every settlement, as metrics and spans see it.
	settled := make(chan acemq.Settlement, 10)
	conn.OnSettle(func(s acemq.Settlement) { settled <- s })

	type Order struct {
		ID string `json:"id"`
	}
	consumer, err := acemq.Consume(ctx, conn, "orders.new",
		func(ctx context.Context, m acemq.Message[Order]) acemq.Ack {
			if m.Envelope.Attempt() == 1 {
				return acemq.Retry(errors.New("the stock service timed out"))
			}
			return acemq.Accept()
		},
		acemq.WithRetry(retry.Fixed(3, 10*time.Millisecond)),
		acemq.WithTopology(topology.New().
			Exchange("orders", topology.ExchangeTopic).
			Queue("orders.new", topology.WithDeadLettering(true)).
			Bind("orders", "orders.new", "order.*")))
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close(ctx)

	if _, err := acemq.NewPublisher[Order](conn, "orders").Send(ctx, "order.placed", Order{ID: "o-1"}); err != nil {
		log.Fatal(err)
	}
	for range 2 {
		s := <-settled
		fmt.Println(s.Envelope.Attempt(), s.Outcome, s.Where, s.Delay)
	}
	// Unordered output:
	// 1 retried consumer 10ms
	// 2 acked  0s
}

// A queue declared with the dead-letter and retry halves a consumer with
// the same policy declares for itself.
func ExampleWithRetry() {
	policy := retry.Exponential(6, 10*time.Second, 5*time.Minute)
	plan, err := topology.New().Queue("orders.new", topology.WithDeadLettering(true), acemq.WithRetry(policy)).Plan()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Print(plan)
	// Output:
	// exchange acemq.dlx (direct, durable)
	// exchange acemq.retry (direct, durable)
	// queue orders.new (quorum, durable) x-dead-letter-exchange=acemq.dlx x-dead-letter-routing-key=orders.new.dlq
	// queue orders.new.dlq (classic, durable)
	// queue orders.new.parked (classic, durable)
	// queue orders.new.retry.40s (classic, durable) x-dead-letter-exchange=acemq.retry x-dead-letter-routing-key=orders.new x-message-ttl=40000
	// queue orders.new.retry.80s (classic, durable) x-dead-letter-exchange=acemq.retry x-dead-letter-routing-key=orders.new x-message-ttl=80000
	// queue orders.new.retry.160s (classic, durable) x-dead-letter-exchange=acemq.retry x-dead-letter-routing-key=orders.new x-message-ttl=160000
	// binding acemq.dlx -> orders.new.dlq on "orders.new.dlq"
	// binding acemq.dlx -> orders.new.parked on "orders.new.parked"
	// binding acemq.retry -> orders.new on "orders.new"
}
