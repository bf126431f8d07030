// Quickstart is the sample of the repository's README as a whole program:
// it connects, declares an exchange and a queue with its dead-letter half,
// consumes the queue with a retry policy and four handlers at once,
// publishes an order, waits for its settlement and closes within a bound.
//
// It runs on the in-process memory:// broker by default:
//
//	go run ./examples/quickstart
//
// and against RabbitMQ with -url or ACEMQ_URL:
//
//	ACEMQ_URL=amqp://guest:guest@127.0.0.1:5672/ go run ./examples/quickstart
//
// Being a demo, it deletes what it declared when it is done (Topology.Delete),
// so that it leaves nothing behind on a real broker; a service keeps its
// queues. The part between README:begin and README:end is the README's
// sample, word for word: a test fails when the two differ.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"sync"
	"time"

	"github.com/acemq/acemq"
	_ "github.com/acemq/acemq/rabbitmq" // amqp:// and amqps://
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// Order is the payload, JSON on the wire.
type Order struct {
	ID    string `json:"id"`
	Pence int    `json:"pence"`
}

// ship stands in for the application's work.
func ship(ctx context.Context, o Order) error {
	if o.ID == "" {
		return acemq.Fatal(errors.New("an order without an id cannot be shipped"))
	}
	return ctx.Err()
}

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	if err != nil && !errors.Is(err, flag.ErrHelp) { // -h printed the usage
		fmt.Fprintln(os.Stderr, "quickstart:", err)
		os.Exit(1)
	}
}

// run parses the flags, runs the sample within -timeout and deletes what
// it declared.
func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("quickstart", flag.ContinueOnError)
	url := fs.String("url", envOr("ACEMQ_URL", "memory://quickstart"), "broker URL (or set ACEMQ_URL)")
	timeout := fs.Duration("timeout", 30*time.Second, "bound on the sample, closing included")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	err := quickstart(ctx, *url, stdout)
	if terr := tidyUp(*url); terr != nil {
		err = errors.Join(err, fmt.Errorf("tidying up: %w", terr))
	}
	return err
}

// README:begin
var topo = topology.New().
	Exchange("orders", topology.ExchangeTopic).
	Queue("orders.new", topology.WithDeadLettering(true)). // with its dead-letter half: orders.new.dlq, orders.new.parked
	Bind("orders", "orders.new", "order.*")

func quickstart(ctx context.Context, url string, out io.Writer) (err error) {
	conn, err := acemq.Connect(ctx, url) // amqp:// needs: import _ "github.com/acemq/acemq/rabbitmq"
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close(ctx)) }() // stops its consumers too, draining within ctx

	settled := make(chan acemq.Settlement, 1)
	var first sync.Once
	conn.OnSettle(func(s acemq.Settlement) { first.Do(func() { settled <- s }) }) // must not block
	consumer, err := acemq.Consume(ctx, conn, "orders.new",
		func(ctx context.Context, m acemq.Message[Order]) acemq.Ack {
			return acemq.FromError(ship(ctx, m.Payload)) // nil accepts, an error retries, acemq.Fatal(err) dead-letters
		},
		acemq.WithTopology(topo), // declared before the consumer starts
		acemq.WithRetry(retry.Exponential(5, time.Second, time.Minute)),
		acemq.WithConcurrency(4))
	if err != nil {
		return err
	}

	orders := acemq.NewPublisher[Order](conn, "orders")
	if _, err := orders.Send(ctx, "order.placed", Order{ID: "o-1", Pence: 1250}); err != nil {
		return err
	}
	select {
	case s := <-settled:
		fmt.Fprintln(out, s.Envelope.Type(), s.Outcome, "on attempt", s.Envelope.Attempt())
	case <-ctx.Done():
		return ctx.Err()
	}
	return consumer.Close(ctx)
}

// README:end

// tidyUp deletes what quickstart declared, on a connection of its own
// (quickstart's is closed by then, its consumer stopped). The library's
// shared exchanges, acemq.dlx and acemq.retry, stay: other queues use them.
func tidyUp(url string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	conn, err := acemq.Connect(ctx, url)
	if err != nil {
		return err
	}
	return errors.Join(topo.Delete(ctx, conn), conn.Close(ctx))
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
