package queues_test

import (
	"context"
	"fmt"
	"log"

	"github.com/acemq/acemq"
	_ "github.com/acemq/acemq/memory" // memory://
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/topology"
)

type order struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

func ExampleBrowse() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-browse")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("orders.new", topology.WithDeadLettering(true)).Apply(ctx, conn); err != nil {
		log.Fatal(err)
	}
	orders := acemq.NewPublisher[order](conn, "")
	for _, id := range []string{"o-1", "o-2"} {
		if _, err := orders.Send(ctx, "orders.new.dlq", order{ID: id}); err != nil {
			log.Fatal(err)
		}
	}

	info, err := queues.Inspect(ctx, conn, "orders.new.dlq")
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(info.Name, "holds", info.Messages)

	// Look without taking: every message read is held, then put back.
	b, err := queues.Browse(ctx, conn, "orders.new.dlq")
	if err != nil {
		log.Fatal(err)
	}
	for {
		m, ok, err := b.Next(ctx)
		if err != nil {
			log.Fatal(err)
		}
		if !ok {
			break
		}
		fmt.Println(string(m.Payload))
	}
	if err := b.Close(); err != nil {
		log.Fatal(err)
	}
	info, _ = queues.Inspect(ctx, conn, "orders.new.dlq")
	fmt.Println("still", info.Messages)
	// Output:
	// orders.new.dlq holds 2
	// {"id":"o-1","amount":0}
	// {"id":"o-2","amount":0}
	// still 2
}
