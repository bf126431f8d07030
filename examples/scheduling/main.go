// Scheduling schedules three reminders — one already due, one in 1.5
// seconds, one in 3 — runs the scheduler's control consumer, and prints
// each reminder as it is delivered, with the id it was scheduled under:
// the scheduler keeps a message's id, correlation and causation across
// its hops.
//
//	go run ./examples/scheduling
//
// It runs on the in-process memory:// broker by default, and against
// RabbitMQ with -url or ACEMQ_URL (amqp://guest:guest@127.0.0.1:5672/);
// being a demo, it deletes its queue when it is done (the scheduler's
// acemq.schedule.* queues are shared by every scheduler on a broker and
// stay).
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
	_ "github.com/acemq/acemq/rabbitmq" // amqp:// and amqps://
	"github.com/acemq/acemq/schedule"
	"github.com/acemq/acemq/topology"
)

// Reminder is the payload, JSON on the wire.
type Reminder struct {
	Invoice string `json:"invoice"`
}

const queue = "reminders"

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "scheduling:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet("scheduling", flag.ContinueOnError)
	url := fs.String("url", envOr("ACEMQ_URL", "memory://scheduling"), "broker URL (or set ACEMQ_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	conn, err := acemq.Connect(ctx, *url, acemq.WithName("acemq example scheduling"))
	if err != nil {
		return err
	}
	defer func() {
		cctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		err = errors.Join(err, conn.Close(cctx))
	}()
	topo := topology.New().Queue(queue, topology.WithQueueType(topology.QueueClassic), topology.WithDeadLettering(true))
	if err := topo.Apply(ctx, conn); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, topo.Delete(context.Background(), conn)) }()

	// The control consumer: it delivers what falls due.
	ctrl, err := schedule.Serve(ctx, conn)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, ctrl.Close(context.Background())) }()

	got := make(chan acemq.Message[Reminder], 3)
	cons, err := acemq.Consume(ctx, conn, queue, func(_ context.Context, m acemq.Message[Reminder]) acemq.Ack {
		got <- m
		return acemq.Accept()
	})
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, cons.Close(context.Background())) }()

	p := schedule.NewPublisher[Reminder](conn, "")
	ids := map[string]string{}
	start := time.Now()
	for _, r := range []struct {
		invoice string
		at      time.Time
	}{
		{"i-1", start.Add(-time.Minute)}, // already due: delivered at once
		{"i-2", start.Add(1500 * time.Millisecond)},
		{"i-3", start.Add(3 * time.Second)},
	} {
		env, err := p.SendAt(ctx, queue, r.at, Reminder{Invoice: r.invoice})
		if err != nil {
			return err
		}
		ids[r.invoice] = env.ID()
		fmt.Fprintf(stdout, "scheduled %s for %+.1fs\n", r.invoice, r.at.Sub(start).Seconds())
	}
	for range 3 {
		select {
		case m := <-got:
			fmt.Fprintf(stdout, "delivered %s: same id %v, attempt %d\n", m.Payload.Invoice, m.Envelope.ID() == ids[m.Payload.Invoice], m.Envelope.Attempt())
		case <-time.After(30 * time.Second):
			return errors.New("a reminder was not delivered within 30s")
		}
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
