package acemq_test

import (
	"context"
	"fmt"
	"log"

	"github.com/acemq/acemq"
)

func ExampleConn_Health() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://health-example")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	r := conn.Health(ctx) // bounded at 3 s when ctx has no deadline
	fmt.Println(r.Status, r.Parts["blocked"], r.Parts["consumers"])
	// Output: up false 0
}

func ExampleAggregateHealth() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://aggregate-example", acemq.WithName("orders"))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	cache := acemq.HealthFunc(func(context.Context) acemq.HealthReport {
		return acemq.HealthReport{Status: acemq.HealthDegraded, Detail: "the cache answers slowly"}
	})
	r := acemq.AggregateHealth(ctx, conn, acemq.NamedHealth("cache", cache))
	fmt.Println(r.Status)
	fmt.Println(r.Detail)
	// Output:
	// degraded
	// cache is degraded: the cache answers slowly
}
