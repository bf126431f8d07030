// Batches consumes a queue of meter readings in batches, for one bulk
// write per batch (acemq.ConsumeBatch), while each reading is still
// settled on its own:
//
//   - a batch is handed over at 5 readings, or 100 ms after its first one
//     arrived, whichever comes first;
//   - a reading with a negative value is rejected (to meter.readings.dlq)
//     and the others of its batch are written;
//   - r-7's write fails the first time: only r-7 is retried, and written
//     on its second attempt.
//
// It prints each batch it wrote, then every reading's outcome.
//
//	go run ./examples/batches
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
	"sync"
	"time"

	"github.com/acemq/acemq"
	_ "github.com/acemq/acemq/rabbitmq" // amqp:// and amqps://
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// Reading is the payload, JSON on the wire.
type Reading struct {
	ID    string  `json:"id"`
	Meter string  `json:"meter"`
	KWh   float64 `json:"kwh"`
}

const queue = "meter.readings"

var topo = topology.New().Queue(queue, topology.WithDeadLettering(true))

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	if err != nil && !errors.Is(err, flag.ErrHelp) { // -h printed the usage
		fmt.Fprintln(os.Stderr, "batches:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) error {
	fs := flag.NewFlagSet("batches", flag.ContinueOnError)
	url := fs.String("url", envOr("ACEMQ_URL", "memory://batches"), "broker URL (or set ACEMQ_URL)")
	n := fs.Int("n", 12, "how many readings to send")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second)
	defer cancel()
	err := demo(ctx, *url, *n, stdout)
	if terr := tidyUp(*url); terr != nil {
		err = errors.Join(err, fmt.Errorf("tidying up: %w", terr))
	}
	return err
}

// table stands in for a database table written in bulk.
type table struct {
	mu     sync.Mutex
	rows   []Reading
	failed bool // r-7's first write has failed
}

// insert writes the readings it can, and returns one error per reading
// (nil for written).
func (t *table) insert(ctx context.Context, rs []Reading) []error {
	t.mu.Lock()
	defer t.mu.Unlock()
	errs := make([]error, len(rs))
	for i, r := range rs {
		switch {
		case r.KWh < 0:
			errs[i] = acemq.Fatal(fmt.Errorf("meter %s: a negative reading (%g kWh)", r.Meter, r.KWh))
		case r.ID == "r-7" && !t.failed:
			t.failed = true
			errs[i] = errors.New("the row lock timed out")
		default:
			t.rows = append(t.rows, r)
		}
	}
	return errs
}

func demo(ctx context.Context, url string, n int, out io.Writer) (err error) {
	conn, err := acemq.Connect(ctx, url)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close(ctx)) }()
	settled := make(chan acemq.Settlement, n+1)
	conn.OnSettle(func(s acemq.Settlement) { settled <- s })

	var db table
	consumer, err := acemq.ConsumeBatch(ctx, conn, queue, 5, 100*time.Millisecond,
		func(ctx context.Context, ms []acemq.Message[Reading]) []acemq.Ack {
			rs := make([]Reading, len(ms))
			ids := make([]string, len(ms))
			for i, m := range ms {
				rs[i], ids[i] = m.Payload, m.Payload.ID
			}
			fmt.Fprintf(out, "batch of %d: %s\n", len(ms), strings.Join(ids, " "))
			acks := make([]acemq.Ack, len(ms))
			for i, err := range db.insert(ctx, rs) {
				acks[i] = acemq.FromError(err) // nil accepts, Fatal rejects, other errors retry
			}
			return acks
		},
		acemq.WithTopology(topo),
		acemq.WithRetry(retry.Fixed(3, 50*time.Millisecond)))
	if err != nil {
		return err
	}

	readings := acemq.NewPublisher[Reading](conn, "") // the default exchange: the key is the queue
	for i := 1; i <= n; i++ {
		r := Reading{ID: fmt.Sprintf("r-%d", i), Meter: fmt.Sprintf("m-%d", i%3), KWh: float64(i) / 4}
		if i == 4 {
			r.KWh = -1
		}
		if _, err := readings.Send(ctx, queue, r); err != nil {
			return err
		}
	}
	var lines []string
	for range n + 1 { // r-7 is settled twice
		select {
		case s := <-settled:
			line := fmt.Sprintf("  attempt %d: %s", s.Envelope.Attempt(), s.Outcome)
			if s.Reason != "" {
				line += " (" + s.Reason + ")"
			}
			lines = append(lines, line)
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	slices.Sort(lines)
	lines = slices.Compact(lines)
	fmt.Fprintf(out, "outcomes:\n%s\n", strings.Join(lines, "\n"))
	if err := consumer.Close(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "%d readings written\n", len(db.rows))
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
