package partition_test

import (
	"context"
	"fmt"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/partition"
)

func ExampleOf() {
	for _, key := range []string{"customer-7", "foobar"} {
		p := partition.Of(key, 8)
		fmt.Println(key, p, partition.RoutingKey("orders", p))
	}
	// Output:
	// customer-7 1 orders.1
	// foobar 0 orders.0
}

// Four partitions behind one exchange, a publisher routing by customer,
// and member 1 of the group on the partition of customer-7.
func ExampleNewPublisher() {
	ctx := context.Background()
	defer memory.Reset("memory://partition-example")
	conn, err := acemq.Connect(ctx, "memory://partition-example")
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	type Order struct{ Customer, ID string }
	topo, err := partition.Topology("orders", "orders", 4)
	if err != nil {
		panic(err)
	}
	if err := topo.Apply(ctx, conn); err != nil {
		panic(err)
	}
	pub, err := partition.NewPublisher(conn, "orders", "orders", 4, func(o Order) string { return o.Customer })
	if err != nil {
		panic(err)
	}
	q := partition.Route("orders", "customer-7", 4)
	got := make(chan string, 2)
	c, err := partition.Join(ctx, conn, q, 1, func(_ context.Context, m acemq.Message[Order]) acemq.Ack {
		got <- m.Payload.ID
		return acemq.Accept()
	})
	if err != nil {
		panic(err)
	}
	defer c.Close(ctx)
	for _, id := range []string{"o-1", "o-2"} {
		if _, err := pub.Send(ctx, Order{Customer: "customer-7", ID: id}); err != nil {
			panic(err)
		}
	}
	fmt.Println(q, c.Tag(), <-got, <-got)
	// Output:
	// orders.1 acemq-orders.1-1 o-1 o-2
}
