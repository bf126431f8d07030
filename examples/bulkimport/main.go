// Bulkimport publishes every line of a file of orders from one goroutine
// with Publisher.SendSeq: the lines are read one at a time and published
// while up to a window of earlier ones await their confirms, so a file of
// any length streams through in the memory of one window. Each line's
// outcome comes back in order: an order for a region nothing is bound to
// is reported as unroutable at its own line, and the others go on. A line
// that cannot be read as an order is skipped and said so.
//
//	go run ./examples/bulkimport              # a built-in sample of orders
//	go run ./examples/bulkimport -file orders.csv
//
// Each line is "id,region,pence". It runs on the in-process memory://
// broker by default, and against RabbitMQ with -url or ACEMQ_URL
// (amqp://guest:guest@127.0.0.1:5672/); being a demo, it deletes what it
// declared when it is done.
package main

import (
	"bufio"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"iter"
	"os"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/queues"
	_ "github.com/acemq/acemq/rabbitmq" // amqp:// and amqps://
	"github.com/acemq/acemq/topology"
)

// Order is the payload, JSON on the wire.
type Order struct {
	ID     string `json:"id"`
	Region string `json:"region"`
	Pence  int    `json:"pence"`
}

const (
	exchange = "imports"
	queue    = "orders.imported"
)

// sample is the file read without -file.
const sample = `o-1,eu,1250
o-2,us,800
o-3,eu,n/a
o-4,mars,100
o-5,us,4200
o-6,eu,15
`

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "bulkimport:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet("bulkimport", flag.ContinueOnError)
	url := fs.String("url", envOr("ACEMQ_URL", "memory://bulkimport"), "broker URL (or set ACEMQ_URL)")
	file := fs.String("file", "", `orders to import, one "id,region,pence" a line (default: a built-in sample)`)
	if err := fs.Parse(args); err != nil {
		return err
	}
	var in io.Reader = strings.NewReader(sample)
	if *file != "" {
		f, err := os.Open(*file)
		if err != nil {
			return err
		}
		defer f.Close()
		in = f
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := acemq.Connect(ctx, *url)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close(ctx)) }()

	// Orders for Europe and the US are taken; nothing is bound for "mars".
	topo := topology.New().
		Exchange(exchange, topology.ExchangeDirect).
		Queue(queue).
		Bind(exchange, queue, "eu").
		Bind(exchange, queue, "us")
	if err := topo.Apply(ctx, conn); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, topo.Delete(ctx, conn)) }()

	// Each message's id names its line, so a result says which line it is.
	// (An id derived from the order would also let a consumer behind
	// inbox.Wrap drop the copies of a second import of the same file.)
	// The lines of the messages awaiting their results, oldest first: at
	// most a window of them.
	var lines []int
	orders := func(yield func(acemq.Outgoing[Order]) bool) {
		for n, o := range readOrders(in, stdout) {
			lines = append(lines, n)
			env := acemq.MustEnvelope(acemq.Fields{ID: fmt.Sprintf("import-%s-line-%d", o.ID, n)})
			if !yield(acemq.Outgoing[Order]{RoutingKey: o.Region, Payload: o, Envelope: env}) {
				return // SendSeq stopped taking messages: ctx ended
			}
		}
	}
	confirmed, total := 0, 0
	err = acemq.NewPublisher[Order](conn, exchange).SendSeq(ctx, orders, func(r acemq.SendResult) {
		line := lines[0]
		lines = lines[1:]
		total++
		var unroutable *driver.ReturnError
		switch {
		case r.Err == nil:
			confirmed++
		case errors.As(r.Err, &unroutable):
			fmt.Fprintf(stdout, "line %d: not imported: no queue takes region %q\n", line, unroutable.RoutingKey)
		default:
			fmt.Fprintf(stdout, "line %d: not imported: %v\n", line, r.Err)
		}
	})
	var be *acemq.BatchError
	switch {
	case errors.As(err, &be) && ctx.Err() == nil:
		// Every failure was reported above, at its line.
		fmt.Fprintf(stdout, "%d of %d orders imported, %d not\n", be.Confirmed, be.Total, be.Failed)
	case err != nil:
		return err
	default:
		fmt.Fprintf(stdout, "%d of %d orders imported\n", confirmed, total)
	}
	info, err := waitDepth(ctx, conn, queue, confirmed)
	if err != nil {
		return err
	}
	fmt.Fprintf(stdout, "%s holds %d\n", queue, info.Messages)
	return nil
}

// readOrders yields each order of r with its line number, and writes a
// line to w for each line it skips.
func readOrders(r io.Reader, w io.Writer) iter.Seq2[int, Order] {
	return func(yield func(int, Order) bool) {
		sc := bufio.NewScanner(r)
		for n := 1; sc.Scan(); n++ {
			text := strings.TrimSpace(sc.Text())
			if text == "" {
				continue
			}
			f := strings.Split(text, ",")
			if len(f) != 3 {
				fmt.Fprintf(w, "line %d: skipped: want id,region,pence, got %q\n", n, text)
				continue
			}
			pence, err := strconv.Atoi(f[2])
			if err != nil {
				fmt.Fprintf(w, "line %d: skipped: the amount %q is not a number of pence\n", n, f[2])
				continue
			}
			if !yield(n, Order{ID: f[0], Region: f[1], Pence: pence}) {
				return
			}
		}
		if err := sc.Err(); err != nil {
			fmt.Fprintf(w, "reading stopped: %v\n", err)
		}
	}
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
