// Console mounts the operator console in a service, beside its consumer,
// on an admin address of its own:
//
//   - a consumer of invoices.in rejects two kinds of bad invoice, so that
//     invoices.in.dlq holds dead letters for two reasons;
//   - console.New(conn, console.WithTopology(topo)) serves the console for
//     the service's own queues; http.Server serves it on -listen
//     (loopback: no token needed);
//   - it prints the address and serves until Ctrl-C (or -for passes), then
//     closes the console before the connection.
//
// Open the address, look at invoices.in.dlq, and replay a group: the
// consumer rejects the invoices again (their cause is not fixed), so they
// come back.
//
//	go run ./examples/console
//	go run ./examples/console -listen 127.0.0.1:8485 -for 1m
//
// It runs on the in-process memory:// broker by default, and against
// RabbitMQ with -url or ACEMQ_URL; it deletes what it declared when it
// stops.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/signal"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/console"
	_ "github.com/acemq/acemq/rabbitmq" // amqp:// and amqps://
	"github.com/acemq/acemq/topology"
)

// Invoice is the payload, JSON on the wire.
type Invoice struct {
	ID       string `json:"id"`
	Customer string `json:"customer"`
	Pence    int    `json:"pence"`
}

// MissingCustomerError and NegativeAmountError are the two reasons.
type MissingCustomerError struct{ ID string }

func (e *MissingCustomerError) Error() string { return "invoice " + e.ID + " names no customer" }

type NegativeAmountError struct{ Pence int }

func (e *NegativeAmountError) Error() string { return fmt.Sprintf("amount %dp is negative", e.Pence) }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	if err := run(ctx, os.Args[1:], os.Stdout, nil); err != nil {
		fmt.Fprintln(os.Stderr, "console:", err)
		os.Exit(1)
	}
}

// run is the program; ready, when set, is told the address served.
func run(ctx context.Context, args []string, out io.Writer, ready func(addr string)) error {
	fl := flag.NewFlagSet("console", flag.ContinueOnError)
	url := fl.String("url", envOr("ACEMQ_URL", "memory://console-example"), "broker URL")
	listen := fl.String("listen", "127.0.0.1:8485", "the console's address (loopback)")
	serveFor := fl.Duration("for", 0, "stop after this long (0: at Ctrl-C)")
	if err := fl.Parse(args); err != nil {
		return err
	}
	if *serveFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, *serveFor)
		defer cancel()
	}
	conn, err := acemq.Connect(ctx, *url, acemq.WithName("examples/console"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())

	topo := topology.New().Queue("invoices.in", topology.WithDeadLettering(true))
	if err := topo.Apply(ctx, conn); err != nil {
		return err
	}
	defer topo.Delete(context.Background(), conn)
	c, err := acemq.Consume(ctx, conn, "invoices.in", func(_ context.Context, m acemq.Message[Invoice]) acemq.Ack {
		switch inv := m.Payload; {
		case inv.Customer == "":
			return acemq.Reject(&MissingCustomerError{ID: inv.ID})
		case inv.Pence < 0:
			return acemq.Reject(&NegativeAmountError{Pence: inv.Pence})
		}
		return acemq.Accept()
	})
	if err != nil {
		return err
	}
	defer c.Close(context.Background())
	pub := acemq.NewPublisher[Invoice](conn, "")
	for _, inv := range []Invoice{{"i-1", "", 500}, {"i-2", "", 120}, {"i-3", "acme", -40}, {"i-4", "acme", 990}} {
		if _, err := pub.Send(ctx, "invoices.in", inv); err != nil {
			return err
		}
	}

	con, err := console.New(conn, console.WithTopology(topo))
	if err != nil {
		return err
	}
	ln, err := net.Listen("tcp", *listen)
	if err != nil {
		return err
	}
	srv := &http.Server{Handler: con, ReadHeaderTimeout: 10 * time.Second}
	done := make(chan error, 1)
	go func() { done <- srv.Serve(ln) }()
	fmt.Fprintf(out, "the console is on http://%s/queues/invoices.in.dlq (Ctrl-C stops)\n", ln.Addr())
	if ready != nil {
		ready(ln.Addr().String())
	}
	<-ctx.Done()
	_ = con.Close() // ends the live streams, which Shutdown would wait for
	sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	_ = srv.Shutdown(sctx)
	if err := <-done; !errors.Is(err, http.ErrServerClosed) {
		return err
	}
	return nil
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
