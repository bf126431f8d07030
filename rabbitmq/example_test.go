package rabbitmq_test

import (
	"context"
	"crypto/tls"
	"log"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/credentials"
	"github.com/acemq/acemq/driver"
	_ "github.com/acemq/acemq/rabbitmq" // registers amqp:// and amqps://
)

// Applications reach the driver through acemq.Connect once it is imported
// for its side effects. (This example needs a broker, so it is compiled but
// not run.)
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	conn, err := acemq.Connect(ctx, "amqps://orders:secret@rabbit-1.example:5671/shop",
		acemq.WithName("orders-service"),
		acemq.WithFallbackURLs("amqps://orders:secret@rabbit-2.example:5671/shop"),
		acemq.WithTLS(&tls.Config{MinVersion: tls.VersionTLS12}),
		acemq.WithCredentials(credentials.FromFile("/run/secrets/rabbitmq")),
		acemq.WithOnConnEvent(func(e driver.Event) { log.Printf("connection %s (attempt %d): %v", e.Kind, e.Attempt, e.Err) }))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(context.Background())
}
