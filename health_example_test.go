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
