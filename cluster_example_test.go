package acemq_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/acemq/acemq"
)

// A cluster's nodes are one comma-separated URL (or the first URL and
// WithFallbackURLs). The RabbitMQ driver dials them in rotation, starting
// at a random node, each within the endpoint timeout; Endpoint says which
// node the connection is on. (A memory:// broker is one node: the other
// URLs of the list are not dialled.)
func ExampleConnect_cluster() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx,
		"memory://example-node-1,memory://example-node-2,memory://example-node-3",
		acemq.WithEndpointTimeout(3*time.Second))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	fmt.Println("on", conn.Endpoint())
	fmt.Println("health says", conn.Health(ctx).Parts["endpoint"])
	// Output:
	// on memory://example-node-1
	// health says memory://example-node-1
}
