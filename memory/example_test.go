package memory_test

import (
	"context"
	"errors"
	"fmt"
	"log"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/topology"
)

// Every connection to the same memory:// URL in a process shares one
// broker, until Reset.
func Example() {
	ctx := context.Background()
	publisher, err := acemq.Connect(ctx, "memory://example-shop")
	if err != nil {
		log.Fatal(err)
	}
	defer publisher.Close(ctx)
	consumer, err := acemq.Connect(ctx, "memory://example-shop")
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close(ctx)

	if err := topology.New().Queue("orders").Apply(ctx, publisher); err != nil {
		log.Fatal(err)
	}
	if _, err := acemq.NewPublisher[string](publisher, "").Send(ctx, "orders", "o-1"); err != nil {
		log.Fatal(err)
	}
	info, err := queues.Inspect(ctx, consumer, "orders")
	fmt.Println(info.Messages, err)

	// Reset empties the broker, as a restart with nothing on disk would,
	// and closes its connections.
	memory.Reset("memory://example-shop")
	fresh, err := acemq.Connect(ctx, "memory://example-shop")
	if err != nil {
		log.Fatal(err)
	}
	defer fresh.Close(ctx)
	_, err = queues.Inspect(ctx, fresh, "orders")
	fmt.Println(errors.Is(err, acemq.ErrNotFound))
	// Output:
	// 1 <nil>
	// true
}
