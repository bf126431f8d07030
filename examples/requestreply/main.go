// Requestreply runs a responder (rpc.Serve) and a requester (rpc.Open, Ask)
// of a price service on one connection, and asks it four questions:
//
//   - a known SKU: the answer;
//   - an unknown SKU: an expected business failure, answered with
//     rpc.Refuse: the caller gets an *rpc.ResponderError at once, marked
//     Refused, and the request is accepted, not dead-lettered;
//   - a SKU whose lookup fails unexpectedly: the caller gets an
//     *rpc.ResponderError at once too, but the request is dead-lettered to
//     prices.dlq for an operator to look at;
//   - a SKU the responder is slow to price: the call gives up after its
//     timeout (rpc.WithTimeout) with an *rpc.TimeoutError; the late answer
//     is dropped when it arrives.
//
// It ends by counting what prices.dlq holds (queues.Inspect): only the
// unexpected failure.
//
//	go run ./examples/requestreply
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
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/queues"
	_ "github.com/acemq/acemq/rabbitmq" // amqp:// and amqps://
	"github.com/acemq/acemq/rpc"
	"github.com/acemq/acemq/topology"
)

// PriceRequest asks for the price of one SKU.
type PriceRequest struct {
	SKU string `json:"sku"`
}

// Quote is the answer.
type Quote struct {
	SKU   string `json:"sku"`
	Pence int    `json:"pence"`
}

const queue = "prices"

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	if err != nil && !errors.Is(err, flag.ErrHelp) { // -h printed the usage
		fmt.Fprintln(os.Stderr, "requestreply:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet("requestreply", flag.ContinueOnError)
	url := fs.String("url", envOr("ACEMQ_URL", "memory://requestreply"), "broker URL (or set ACEMQ_URL)")
	timeout := fs.Duration("timeout", 500*time.Millisecond, "how long the slow call waits; the responder takes twice as long")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second+10*(*timeout))
	defer cancel()

	conn, err := acemq.Connect(ctx, *url)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close(ctx)) }()
	// The application declares the request queue; Serve declares only its
	// dead-letter half.
	topo := topology.New().Queue(queue, topology.WithDeadLettering(true))
	if err := topo.Apply(ctx, conn); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, topo.Delete(ctx, conn)) }() // a demo leaves nothing behind

	slow := 2 * *timeout
	responder, err := rpc.Serve(ctx, conn, queue, prices(slow),
		acemq.WithConcurrency(4),
		acemq.WithDrainTimeout(slow+5*time.Second)) // Close waits for the slow request
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, responder.Close(ctx)) }()

	// One requester per connection, opened at start-up, for every call.
	ask, err := rpc.Open[PriceRequest, Quote](ctx, conn, "", queue, rpc.WithTimeout(5*time.Second))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ask.Close(ctx)) }()

	for _, call := range []struct {
		sku  string
		opts []rpc.CallOption
	}{
		{sku: "A-1"},
		{sku: "ZZZ"},
		{sku: "B-2"},
		{sku: "C-3", opts: []rpc.CallOption{rpc.WithTimeout(*timeout)}},
	} {
		q, err := ask.Ask(ctx, PriceRequest{SKU: call.sku}, call.opts...)
		var failed *rpc.ResponderError
		var timedOut *rpc.TimeoutError
		switch {
		case err == nil:
			fmt.Fprintf(stdout, "%s: %dp\n", q.SKU, q.Pence)
		case errors.As(err, &failed) && failed.Refused:
			fmt.Fprintf(stdout, "%s: the responder refused: %s\n", call.sku, failed.Text)
		case errors.As(err, &failed):
			fmt.Fprintf(stdout, "%s: the responder failed: %s\n", call.sku, failed.Text)
		case errors.As(err, &timedOut):
			fmt.Fprintf(stdout, "%s: no answer within %s (rpc.ErrTimeout: %t)\n", call.sku, timedOut.Timeout, errors.Is(err, rpc.ErrTimeout))
		default:
			return err
		}
	}

	// Closing the responder drains it: the slow request is answered (too
	// late) and every request is settled before it returns.
	if err := responder.Close(ctx); err != nil {
		return err
	}
	fmt.Fprintf(stdout, "answered %d, refused %d\n", responder.Answered(), responder.Refused())
	dlq, err := queues.Inspect(ctx, conn, contract.DeadLetterQueue(queue))
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s holds %d message(s); refused requests are not dead-lettered\n", dlq.Name, dlq.Messages)
	return nil
}

// prices is the responder's handler. It knows two SKUs, cannot reach its
// database for B-2, and is slow to price C-3.
func prices(slow time.Duration) rpc.Handler[PriceRequest, Quote] {
	catalogue := map[string]int{"A-1": 250, "C-3": 1999}
	return func(ctx context.Context, m acemq.Message[PriceRequest]) (Quote, error) {
		sku := m.Payload.SKU
		switch sku {
		case "B-2":
			// Unexpected: the caller is told, and the request is dead-lettered.
			return Quote{}, errors.New("the price database is unreachable")
		case "C-3":
			select {
			case <-time.After(slow):
			case <-ctx.Done():
				return Quote{}, ctx.Err()
			}
		}
		pence, ok := catalogue[sku]
		if !ok {
			// Expected: the caller is told; there is nothing to dead-letter.
			return Quote{}, rpc.Refuse(fmt.Errorf("unknown SKU %q", sku))
		}
		return Quote{SKU: sku, Pence: pence}, nil
	}
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
