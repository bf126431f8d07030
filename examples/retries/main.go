// Retries publishes three payments and consumes them with a retry policy,
// to show what happens to a message that fails:
//
//   - pay-1 meets a gateway timeout twice and is charged on its third
//     attempt; its first wait is held in the consumer, its second on a
//     broker rung queue (WaitInBrokerFrom);
//   - pay-2 has a malformed card: the handler says so with acemq.Fatal and
//     the payment is dead-lettered at once, attempts left or not;
//   - pay-3 times out every time and is dead-lettered with
//     "exhausted 4 attempts: …".
//
// It prints every settlement it saw, then what payments.dlq holds, read
// with a Browser that puts the messages back (an operator's look).
//
//	go run ./examples/retries
//	go run ./examples/retries -delay 1s
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
	"strings"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/queues"
	_ "github.com/acemq/acemq/rabbitmq" // amqp:// and amqps://
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// Payment is the payload, JSON on the wire.
type Payment struct {
	ID    string `json:"id"`
	Card  string `json:"card"`
	Pence int    `json:"pence"`
}

const queue = "payments"

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	if err != nil && !errors.Is(err, flag.ErrHelp) { // -h printed the usage
		fmt.Fprintln(os.Stderr, "retries:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet("retries", flag.ContinueOnError)
	url := fs.String("url", envOr("ACEMQ_URL", "memory://retries"), "broker URL (or set ACEMQ_URL)")
	delay := fs.Duration("delay", 200*time.Millisecond, "the first retry's wait; each later one doubles")
	if err := fs.Parse(args); err != nil {
		return err
	}
	d := *delay
	ctx, cancel := context.WithTimeout(ctx, 30*time.Second+10*d)
	defer cancel()

	// Four attempts, waiting d, 2d and 4d before the next; waits of 2d or
	// more are held on broker rungs (payments.retry.{wait}), shorter ones
	// in the consumer.
	policy := retry.Exponential(4, d, 4*d).WaitInBrokerFrom(2 * d)
	fmt.Fprintf(stdout, "policy %s, waits %v\n", policy, policy.Schedule())
	topo := topology.New().Queue(queue, topology.WithDeadLettering(true), acemq.WithRetry(policy))

	conn, err := acemq.Connect(ctx, *url)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close(ctx)) }()
	if err := topo.Apply(ctx, conn); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, topo.Delete(ctx, conn)) }() // a demo leaves nothing behind

	seen := record(conn)
	gateway := &gateway{timeouts: map[string]int{"pay-1": 2, "pay-3": 1000}}
	consumer, err := acemq.Consume(ctx, conn, queue,
		func(ctx context.Context, m acemq.Message[Payment]) acemq.Ack {
			return acemq.FromError(gateway.charge(ctx, m.Payload))
		},
		acemq.WithRetry(policy))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, consumer.Close(ctx)) }()

	payments := acemq.NewPublisher[Payment](conn, "") // the default exchange routes by queue name
	for _, p := range []Payment{
		{ID: "pay-1", Card: "4242424242424242", Pence: 1250},
		{ID: "pay-2", Card: "4242-oops", Pence: 990},
		{ID: "pay-3", Card: "4000000000000119", Pence: 4500},
	} {
		// The payment's id as the message id: it stays the same on every retry.
		env, err := acemq.NewEnvelope(acemq.Fields{ID: p.ID, Type: "payment"})
		if err != nil {
			return err
		}
		if _, err := payments.Send(ctx, queue, p, acemq.WithEnvelope(env)); err != nil {
			return err
		}
	}

	// Three payments, three final settlements: acked, rejected, dead-lettered.
	all, err := seen.final(ctx, 3)
	if err != nil {
		return err
	}
	fmt.Fprintln(stdout, "settlements:")
	for _, s := range all {
		fmt.Fprintf(stdout, "  %s attempt %d: %s", s.Envelope.ID(), s.Envelope.Attempt(), s.Outcome)
		if s.Where != "" {
			fmt.Fprintf(stdout, ", waiting %s in the %s", s.Delay.Round(time.Millisecond), s.Where)
		}
		if s.Reason != "" {
			fmt.Fprintf(stdout, " (%s)", s.Reason)
		}
		fmt.Fprintln(stdout)
	}
	return showDeadLetters(ctx, conn, stdout)
}

// showDeadLetters prints what payments.dlq holds without taking it: a
// Browser holds what it reads until it is closed, then puts it all back.
func showDeadLetters(ctx context.Context, conn *acemq.Conn, stdout io.Writer) (err error) {
	dlq := contract.DeadLetterQueue(queue)
	b, err := queues.Browse(ctx, conn, dlq)
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	fmt.Fprintf(stdout, "%s holds:\n", dlq)
	for {
		m, ok, err := b.Next(ctx)
		if err != nil {
			return err
		}
		if !ok {
			return nil
		}
		fmt.Fprintf(stdout, "  %s attempt %d: %s\n    %s\n", m.Envelope.ID(), m.Envelope.Attempt(), m.Body, m.Envelope.Reason())
	}
}

// gateway stands in for a payment gateway that times out on some
// payments: timeouts says how many times for each.
type gateway struct {
	mu       sync.Mutex
	timeouts map[string]int
}

func (g *gateway) charge(ctx context.Context, p Payment) error {
	if len(strings.Trim(p.Card, "0123456789")) > 0 || len(p.Card) != 16 {
		// Retrying cannot fix this: dead-letter it at once.
		return acemq.Fatal(fmt.Errorf("the card number of %s is malformed", p.ID))
	}
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.timeouts[p.ID] > 0 {
		g.timeouts[p.ID]--
		return errors.New("the payment gateway timed out")
	}
	return ctx.Err()
}

// recorder keeps the settlements a connection reports.
type recorder struct {
	mu   sync.Mutex
	all  []acemq.Settlement
	more chan struct{} // signalled after each settlement
}

func record(conn *acemq.Conn) *recorder {
	r := &recorder{more: make(chan struct{}, 1)}
	conn.OnSettle(func(s acemq.Settlement) { // runs on the consumer's goroutine: must not block
		r.mu.Lock()
		r.all = append(r.all, s)
		r.mu.Unlock()
		select {
		case r.more <- struct{}{}:
		default:
		}
	})
	return r
}

// final waits until n settlements other than retries are recorded and
// returns every settlement recorded.
func (r *recorder) final(ctx context.Context, n int) ([]acemq.Settlement, error) {
	for {
		r.mu.Lock()
		all := append([]acemq.Settlement(nil), r.all...)
		r.mu.Unlock()
		got := 0
		for _, s := range all {
			if s.Outcome != acemq.OutcomeRetried {
				got++
			}
		}
		if got >= n {
			return all, nil
		}
		select {
		case <-r.more:
		case <-ctx.Done():
			return all, fmt.Errorf("%d of %d payments settled: %w", got, n, ctx.Err())
		}
	}
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
