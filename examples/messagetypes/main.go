// Messagetypes consumes one queue that carries several message types, with
// one typed handler per type on one consumer (acemq.ConsumeTypes):
//
//   - order.placed is decoded into an OrderPlaced and accepted;
//   - order.cancelled is decoded into an OrderCancelled; one that names no
//     order is dead-lettered at once (acemq.Fatal);
//   - order.shipped has no handler: by default it is dead-lettered with a
//     reason naming its type and the registered ones (-ignore-unknown
//     accepts it instead, through acemq.WithUnknownType).
//
// It prints every settlement, then what shop.orders.dlq holds.
//
//	go run ./examples/messagetypes
//	go run ./examples/messagetypes -ignore-unknown
//
// It runs on the in-process memory:// broker by default, and against
// RabbitMQ with -url or ACEMQ_URL (amqp://guest:guest@127.0.0.1:5672/);
// being a demo, it deletes what it declared when it is done.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/queues"
	_ "github.com/acemq/acemq/rabbitmq" // amqp:// and amqps://
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// OrderPlaced is the payload of order.placed.
type OrderPlaced struct {
	ID    string `json:"id"`
	Pence int    `json:"pence"`
}

// OrderCancelled is the payload of order.cancelled.
type OrderCancelled struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// OrderShipped is the payload of order.shipped, which this service does
// not handle.
type OrderShipped struct {
	ID      string `json:"id"`
	Carrier string `json:"carrier"`
}

const queue = "shop.orders"

var topo = topology.New().
	Exchange("shop", topology.ExchangeTopic).
	Queue(queue, topology.WithDeadLettering(true)).
	Bind("shop", queue, "order.*")

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	if err != nil && !errors.Is(err, flag.ErrHelp) { // -h printed the usage
		fmt.Fprintln(os.Stderr, "messagetypes:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("messagetypes", flag.ContinueOnError)
	url := fs.String("url", envOr("ACEMQ_URL", "memory://messagetypes"), "broker URL (or set ACEMQ_URL)")
	ignore := fs.Bool("ignore-unknown", false, "accept (drop) types without a handler instead of dead-lettering them")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := demo(ctx, *url, *ignore, stdout)
	if terr := tidyUp(*url); terr != nil {
		err = errors.Join(err, fmt.Errorf("tidying up: %w", terr))
	}
	return err
}

func demo(ctx context.Context, url string, ignore bool, out io.Writer) (err error) {
	conn, err := acemq.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close(ctx)) }()
	settled := make(chan acemq.Settlement, 10)
	conn.OnSettle(func(s acemq.Settlement) { settled <- s })

	handlers := []acemq.TypeHandler{
		acemq.HandleType("order.placed", func(ctx context.Context, m acemq.Message[OrderPlaced]) acemq.Ack {
			fmt.Fprintf(out, "placed %s for %d pence\n", m.Payload.ID, m.Payload.Pence)
			return acemq.Accept()
		}),
		acemq.HandleType("order.cancelled", func(ctx context.Context, m acemq.Message[OrderCancelled]) acemq.Ack {
			if m.Payload.ID == "" {
				return acemq.Reject(acemq.Fatal(errors.New("a cancellation names no order")))
			}
			fmt.Fprintf(out, "cancelled %s: %s\n", m.Payload.ID, m.Payload.Reason)
			return acemq.Accept()
		}),
	}
	opts := []acemq.ConsumeOption{
		acemq.WithTopology(topo),
		acemq.WithRetry(retry.Fixed(3, 100*time.Millisecond)),
	}
	if ignore {
		opts = append(opts, acemq.WithUnknownType(func(ctx context.Context, m acemq.Message[[]byte]) acemq.Ack {
			fmt.Fprintf(out, "ignored %s: %s\n", m.Envelope.Type(), m.Payload)
			return acemq.Accept()
		}))
	}
	consumer, err := acemq.ConsumeTypes(ctx, conn, queue, handlers, opts...)
	if err != nil {
		return err
	}

	// The type is the routing key each is sent with (acemq-type).
	if _, err := acemq.NewPublisher[OrderPlaced](conn, "shop").Send(ctx, "order.placed", OrderPlaced{ID: "o-1", Pence: 1250}); err != nil {
		return err
	}
	cancels := acemq.NewPublisher[OrderCancelled](conn, "shop")
	if _, err := cancels.Send(ctx, "order.cancelled", OrderCancelled{ID: "o-1", Reason: "changed my mind"}); err != nil {
		return err
	}
	if _, err := cancels.Send(ctx, "order.cancelled", OrderCancelled{Reason: "no id"}); err != nil {
		return err
	}
	if _, err := acemq.NewPublisher[OrderShipped](conn, "shop").Send(ctx, "order.shipped", OrderShipped{ID: "o-2", Carrier: "owl"}); err != nil {
		return err
	}
	var lines []string
	for range 4 {
		select {
		case s := <-settled:
			line := fmt.Sprintf("  %s: %s", s.Envelope.Type(), s.Outcome)
			if s.Reason != "" {
				line += " (" + s.Reason + ")"
			}
			lines = append(lines, line)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	slices.Sort(lines)
	fmt.Fprintf(out, "settlements:\n%s\n", strings.Join(lines, "\n"))
	if err := consumer.Close(ctx); err != nil {
		return err
	}
	info, err := queues.Inspect(ctx, conn, contract.DeadLetterQueue(queue))
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "%s holds %d messages\n", contract.DeadLetterQueue(queue), info.Messages)
	return nil
}

// tidyUp deletes what demo declared, on a connection of its own.
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
