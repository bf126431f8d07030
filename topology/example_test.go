package topology_test

import (
	"fmt"
	"log"

	"github.com/acemq/acemq/topology"
)

func ExampleTopology() {
	topo := topology.New().
		Exchange("orders", topology.ExchangeTopic).
		Queue("orders.new", topology.WithDeadLettering(true)).
		Bind("orders", "orders.new", "order.*")
	plan, err := topo.Plan()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Print(plan)
	// Output:
	// exchange orders (topic, durable)
	// exchange acemq.dlx (direct, durable)
	// queue orders.new (quorum, durable) x-dead-letter-exchange=acemq.dlx x-dead-letter-routing-key=orders.new.dlq
	// queue orders.new.dlq (classic, durable)
	// queue orders.new.parked (classic, durable)
	// binding acemq.dlx -> orders.new.dlq on "orders.new.dlq"
	// binding acemq.dlx -> orders.new.parked on "orders.new.parked"
	// binding orders -> orders.new on "order.*"
}

// Quorum queues replicated on three nodes of the cluster.
func ExampleWithInitialGroupSize() {
	plan, err := topology.New().Queue("orders", topology.WithInitialGroupSize(3)).Plan()
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(plan[1]) // after acemq.dlx, which its dead-letter half needs

	// Only a quorum queue can take it.
	err = topology.New().Queue("replies", topology.WithInitialGroupSize(3), topology.WithExclusive()).Validate()
	fmt.Println(err)
	// Output:
	// queue orders (quorum, durable) x-dead-letter-exchange=acemq.dlx x-dead-letter-routing-key=orders.dlq x-quorum-initial-group-size=3
	// topology: the queue "replies" is a classic queue: WithInitialGroupSize applies to quorum queues only; drop the option, or make the queue durable, not exclusive and not auto-delete (a quorum queue)
}
