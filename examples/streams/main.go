// Streams declares a stream with retention, publishes order events into it
// and reads them the way an event log is read. A billing reader reads from
// the first event, parks one it cannot bill and rejects one that is wrong
// (copies go to orders.events.parked and orders.events.dlq; the originals
// stay in the stream), and keeps a checkpoint. More events arrive, and a
// second billing reader with the same checkpoint reads only those. An audit
// reader then reads the whole stream again from offset 0: reading a stream
// removes nothing.
//
//	go run ./examples/streams
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
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/queues"
	_ "github.com/acemq/acemq/rabbitmq" // amqp:// and amqps://
	"github.com/acemq/acemq/stream"
	"github.com/acemq/acemq/topology"
)

// Event is the payload, JSON on the wire.
type Event struct {
	Order string `json:"order"`
	Kind  string `json:"kind"`
	Pence int    `json:"pence"`
}

const events = "orders.events"

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "streams:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet("streams", flag.ContinueOnError)
	url := fs.String("url", envOr("ACEMQ_URL", "memory://streams"), "broker URL (or set ACEMQ_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	conn, err := acemq.Connect(ctx, *url)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close(ctx)) }()

	// A week of events, at most 1 GiB: x-max-age=7D, x-max-length-bytes.
	topo := topology.New().
		Queue(events, topology.WithQueueType(topology.QueueStream), topology.WithMaxAge(7*24*time.Hour), topology.WithMaxLengthBytes(1<<30)).
		Queue(contract.DeadLetterQueue(events), topology.WithQueueType(topology.QueueClassic)).
		Queue(contract.ParkedQueue(events), topology.WithQueueType(topology.QueueClassic))
	if err := topo.Apply(ctx, conn); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, topo.Delete(ctx, conn)) }()

	pub := acemq.NewPublisher[Event](conn, "")
	send := func(evs ...Event) error {
		for _, e := range evs {
			if _, err := pub.Send(ctx, events, e); err != nil {
				return err
			}
		}
		return nil
	}
	if err := send(Event{"o-1", "placed", 1250}, Event{"o-2", "placed", 0}, Event{"o-3", "placed", -5}, Event{"o-1", "shipped", 0}); err != nil {
		return err
	}

	checkpoints := &stream.Memory{} // sqlcheckpoint.New(db) keeps them in PostgreSQL
	bill := func(ctx context.Context, m acemq.Message[Event]) acemq.Ack {
		e := m.Payload
		switch {
		case e.Kind != "placed":
			return acemq.Accept() // nothing to bill
		case e.Pence < 0:
			return acemq.Reject(fmt.Errorf("order %s has a negative amount", e.Order))
		case e.Pence == 0:
			return acemq.Park(fmt.Errorf("order %s has no price yet", e.Order))
		}
		fmt.Fprintf(stdout, "  billed %s: %d pence (offset %d)\n", e.Order, e.Pence, m.Offset)
		return acemq.Accept()
	}
	fmt.Fprintln(stdout, "billing, from the first event:")
	if err := readN(ctx, conn, 4, bill, stream.WithOffset(stream.First()), stream.WithCheckpoints(checkpoints, "billing@"+events)); err != nil {
		return err
	}
	last, _, _ := checkpoints.Load(ctx, "billing@"+events)
	fmt.Fprintf(stdout, "  checkpoint: offset %d\n", last)

	if err := send(Event{"o-4", "placed", 800}); err != nil {
		return err
	}
	fmt.Fprintln(stdout, "billing again, from its checkpoint:")
	if err := readN(ctx, conn, 1, bill, stream.WithOffset(stream.First()), stream.WithCheckpoints(checkpoints, "billing@"+events)); err != nil {
		return err
	}

	fmt.Fprintln(stdout, "audit, from offset 0:")
	audit := func(_ context.Context, m acemq.Message[Event]) acemq.Ack {
		fmt.Fprintf(stdout, "  %d: %s %s\n", m.Offset, m.Payload.Order, m.Payload.Kind)
		return acemq.Accept()
	}
	if err := readN(ctx, conn, 5, audit, stream.WithOffset(stream.At(0))); err != nil {
		return err
	}
	for _, q := range []string{contract.DeadLetterQueue(events), contract.ParkedQueue(events)} {
		info, err := waitDepth(ctx, conn, q, 1)
		if err != nil {
			return err
		}
		fmt.Fprintf(stdout, "%s holds %d\n", q, info.Messages)
	}
	return nil
}

// readN reads the stream with h until n messages were handled, then closes
// the reader (which saves its checkpoint).
func readN(ctx context.Context, conn *acemq.Conn, n int, h acemq.Handler[Event], opts ...stream.Option) error {
	var mu sync.Mutex
	done := make(chan struct{})
	seen := 0
	r, err := stream.Read(ctx, conn, events, func(ctx context.Context, m acemq.Message[Event]) acemq.Ack {
		ack := h(ctx, m)
		mu.Lock()
		defer mu.Unlock()
		if seen++; seen == n {
			close(done)
		}
		return ack
	}, opts...)
	if err != nil {
		return err
	}
	select {
	case <-done:
	case <-ctx.Done():
	}
	return errors.Join(ctx.Err(), r.Close(ctx))
}

// waitDepth waits until q holds at least n messages.
func waitDepth(ctx context.Context, conn *acemq.Conn, q string, n int) (queues.Info, error) {
	for {
		info, err := queues.Inspect(ctx, conn, q)
		if err != nil || info.Messages >= n {
			return info, err
		}
		select {
		case <-ctx.Done():
			return info, ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
