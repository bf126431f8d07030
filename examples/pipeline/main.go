// Pipeline shows the message pipeline on one consumer of stock
// reservations (docs/pipeline.md):
//
//   - a publish interceptor stamps the tenant, taken from the context, on
//     every reservation the application publishes;
//   - a consume interceptor refuses a tenant it does not serve: that
//     message is dead-lettered with "an interceptor refused it: …";
//   - middleware logs a line per message and gives the handler a deadline;
//   - the stock service is down at first: after two failures the circuit
//     breaker opens, the consumer pauses instead of spending the backlog's
//     attempts, and when the service is back a probe closes the breaker and
//     every reservation goes through, none dead-lettered;
//   - the consumer is paused and resumed by hand; the connection logs its
//     operator events (the breaker, the pause) through log/slog.
//
// Run it from the module root:
//
//	go run ./examples/pipeline
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
	"log/slog"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/queues"
	_ "github.com/acemq/acemq/rabbitmq" // amqp:// and amqps://
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// Reservation is the payload, JSON on the wire.
type Reservation struct {
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

const queue = "reservations"

type tenantKey struct{}

var errStockDown = errors.New("the stock service is unavailable")

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "pipeline:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet("pipeline", flag.ContinueOnError)
	url := fs.String("url", envOr("ACEMQ_URL", "memory://pipeline"), "broker URL (or set ACEMQ_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	var out sync.Mutex // the log and the program's own lines share stdout
	logger := slog.New(slog.NewTextHandler(&lockedWriter{w: stdout, mu: &out}, &slog.HandlerOptions{
		// No times or durations: the output reads the same every run.
		ReplaceAttr: func(_ []string, a slog.Attr) slog.Attr {
			switch a.Key {
			case slog.TimeKey, "duration", "acemq.url", "message.id", "correlation.id", "origin", "routing.key", "exchange", "causation.id", "coolDown", "redelivered":
				return slog.Attr{}
			}
			return a
		},
	}))
	say := func(format string, args ...any) {
		out.Lock()
		defer out.Unlock()
		fmt.Fprintf(stdout, format+"\n", args...)
	}

	conn, err := acemq.Connect(ctx, *url,
		acemq.WithLogger(logger),
		acemq.WithPublishInterceptors(func(ctx context.Context, p *acemq.Publishing) error {
			tenant, _ := ctx.Value(tenantKey{}).(string)
			if tenant == "" {
				return errors.New("a reservation needs a tenant in its context")
			}
			return p.SetHeader("tenant", tenant)
		}))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close(ctx)) }()
	topo := topology.New().Queue(queue, topology.WithDeadLettering(true))
	if err := topo.Apply(ctx, conn); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, topo.Delete(ctx, conn)) }()

	var down atomic.Bool // the stock service, down until the breaker has opened
	down.Store(true)
	reserved := make(chan Reservation, 16)
	settled := make(chan acemq.Settlement, 64)
	conn.OnSettle(func(s acemq.Settlement) { settled <- s })
	consumer, err := acemq.Consume(ctx, conn, queue,
		func(ctx context.Context, m acemq.Message[Reservation]) acemq.Ack {
			if down.Load() {
				return acemq.Retry(errStockDown)
			}
			reserved <- m.Payload
			return acemq.Accept()
		},
		acemq.WithConsumeInterceptors(func(ctx context.Context, d acemq.Message[[]byte]) (context.Context, error) {
			if tenant, _ := d.Envelope.Header("tenant"); tenant != "acme" {
				return nil, fmt.Errorf("tenant %v is not served here", tenant)
			}
			return ctx, nil
		}),
		acemq.WithMiddleware(
			middleware.Log[Reservation](logger),
			middleware.Timeout[Reservation](2*time.Second),
		),
		acemq.WithRetry(retry.Fixed(5, 10*time.Millisecond)),
		acemq.WithBreaker(acemq.Breaker{ConsecutiveFailures: 2, CoolDown: 100 * time.Millisecond}),
	)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, consumer.Close(ctx)) }()

	reservations := acemq.NewPublisher[Reservation](conn, "")
	send := func(tenant string, r Reservation) error {
		_, err := reservations.Send(context.WithValue(ctx, tenantKey{}, tenant), queue, r)
		return err
	}

	// A tenant the consumer does not serve: refused, dead-lettered.
	if err := send("globex", Reservation{SKU: "anvil", Qty: 1}); err != nil {
		return err
	}
	refused := next(ctx, settled, func(s acemq.Settlement) bool { return s.Outcome == acemq.OutcomeRejected })
	say("globex's reservation: %s to %s (%s)", refused.Outcome, refused.Target, refused.Reason)

	// Four reservations while the stock service is down.
	for i := 1; i <= 4; i++ {
		if err := send("acme", Reservation{SKU: fmt.Sprintf("sku-%d", i), Qty: i}); err != nil {
			return err
		}
	}
	next(ctx, settled, func(s acemq.Settlement) bool { return s.Outcome == acemq.OutcomeRequeued })
	say("the breaker is %s; consumer paused: %v", consumer.Breaker(), consumer.Paused())
	down.Store(false) // the stock service is back
	for range 4 {
		select {
		case r := <-reserved:
			_ = r
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	waitFor(ctx, func() bool { return consumer.Breaker() == acemq.BreakerClosed })
	info, err := queues.Inspect(ctx, conn, contract.DeadLetterQueue(queue))
	if err != nil {
		return err
	}
	say("all 4 reserved; the breaker is %s; %s holds %d (the refused one)", consumer.Breaker(), contract.DeadLetterQueue(queue), info.Messages)

	// Paused by hand: what arrives waits on the queue.
	if err := consumer.Pause(ctx); err != nil {
		return err
	}
	if err := send("acme", Reservation{SKU: "sku-5", Qty: 5}); err != nil {
		return err
	}
	info, err = queues.Inspect(ctx, conn, queue)
	if err != nil {
		return err
	}
	say("paused: %d waiting on %s", info.Messages, queue)
	if err := consumer.Resume(ctx); err != nil {
		return err
	}
	select {
	case r := <-reserved:
		say("resumed: reserved %s", r.SKU)
	case <-ctx.Done():
		return ctx.Err()
	}
	// A publish without a tenant is refused by the publish interceptor.
	if _, err := reservations.Send(ctx, queue, Reservation{SKU: "sku-6"}); err != nil {
		say("without a tenant: %v", err)
	}
	return nil
}

// next returns the first settlement from ch that matches.
func next(ctx context.Context, ch <-chan acemq.Settlement, match func(acemq.Settlement) bool) acemq.Settlement {
	for {
		select {
		case s := <-ch:
			if match(s) {
				return s
			}
		case <-ctx.Done():
			return acemq.Settlement{}
		}
	}
}

func waitFor(ctx context.Context, cond func() bool) {
	for !cond() && ctx.Err() == nil {
		time.Sleep(5 * time.Millisecond)
	}
}

type lockedWriter struct {
	w  io.Writer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
