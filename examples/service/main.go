// Service is the skeleton of a long-running service built on acemq: it
// connects with a name and an origin, declares its topology, consumes the
// "orders" queue with retries and a bounded drain, publishes orders (standing
// in for the traffic a real service would receive), logs with log/slog, and
// on SIGINT or SIGTERM shuts down within a bound: the consumer drains first,
// then the connection closes. With -metrics it also serves the family's
// /acemq-metrics, /acemq-health and /acemq-info endpoints (package actuator).
//
//	go run ./examples/service                  # until Ctrl-C
//	go run ./examples/service -for 2s          # stops by itself
//	go run ./examples/service -metrics 127.0.0.1:9464
//	curl http://127.0.0.1:9464/acemq-health
//
// It runs on the in-process memory:// broker by default and against RabbitMQ
// with -url or ACEMQ_URL (amqp://guest:guest@127.0.0.1:5672/). Like any
// service, it leaves its exchange and queues declared there: shop, orders,
// orders.dlq and orders.parked.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"log/slog"
	"net"
	"os"
	"os/signal"
	"syscall"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/actuator"
	_ "github.com/acemq/acemq/rabbitmq" // amqp:// and amqps://
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

const (
	name    = "orders-service"
	version = "0.1.0"
)

// Order is the payload, JSON on the wire.
type Order struct {
	ID    string `json:"id"`
	Pence int    `json:"pence"`
}

// declarations is what the service needs on the broker: its exchange, its queue
// with the dead-letter half (orders.dlq, orders.parked) and the binding.
func declarations() *topology.Topology {
	return topology.New().
		Exchange("shop", topology.ExchangeTopic).
		Queue("orders", topology.WithDeadLettering(true)).
		Bind("shop", "orders", "order.*")
}

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	if err != nil && !errors.Is(err, flag.ErrHelp) { // -h printed the usage
		slog.Error(name+" failed", "err", err)
		os.Exit(1)
	}
}

// run is the whole service; main only gives it the process's arguments
// and output.
func run(ctx context.Context, args []string, stdout io.Writer) (err error) {
	fs := flag.NewFlagSet(name, flag.ContinueOnError)
	url := fs.String("url", envOr("ACEMQ_URL", "memory://"+name), "broker URL (or set ACEMQ_URL)")
	runFor := fs.Duration("for", 0, "stop after this long; 0 runs until SIGINT or SIGTERM")
	metrics := fs.String("metrics", "", "serve the actuator endpoints on this address, for example 127.0.0.1:9464")
	every := fs.Duration("every", time.Second, "publish an order this often")
	grace := fs.Duration("grace", 10*time.Second, "bound on the shutdown")
	if err := fs.Parse(args); err != nil {
		return err
	}
	log := slog.New(slog.NewTextHandler(stdout, nil))

	ctx, stop := signal.NotifyContext(ctx, os.Interrupt, syscall.SIGTERM)
	defer stop()
	if *runFor > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, *runFor, fmt.Errorf("ran for %s (-for)", *runFor))
		defer cancel()
	}

	// What is opened is closed in the reverse order, within -grace of its
	// own (ctx is done by then), also when the start fails half way.
	var closers []func(context.Context) error
	defer func() {
		sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), *grace)
		defer cancel()
		for i := len(closers) - 1; i >= 0; i-- {
			err = errors.Join(err, closers[i](sctx))
		}
		if err == nil {
			log.Info("stopped")
		}
	}()

	opts := []acemq.ConnOption{acemq.WithName(name), acemq.WithOrigin(origin())}
	var ep *actuator.Endpoints
	if *metrics != "" {
		if ep, err = actuator.New(actuator.WithApplication(name, version)); err != nil {
			return err
		}
		closers = append(closers, ep.Shutdown)
		var stopServing func(context.Context) error
		if stopServing, err = serve(*metrics, ep, log); err != nil {
			return err
		}
		closers = append(closers, stopServing) // stopped once the connection is closed: health is served while it drains
		opts = append(opts, acemq.WithMeterProvider(ep.MeterProvider()))
	}

	conn, err := acemq.Connect(ctx, *url, opts...)
	if err != nil {
		return err
	}
	closers = append(closers, conn.Close)
	log.Info("connected", "broker", conn.URL(), "origin", conn.Origin())
	if ep != nil {
		ep.Watch(conn)
	}

	consumer, err := consume(ctx, conn, log)
	if err != nil {
		return err
	}
	// Closed before the connection: running handlers finish, deliveries
	// not started go back to the queue, within the drain timeout.
	closers = append(closers, consumer.Close)
	log.Info("ready", "queue", consumer.Queue())

	publish(ctx, conn, *every, log) // until a signal or -for
	stop()                          // a second signal ends the process at once
	log.Info("shutting down", "cause", context.Cause(ctx), "grace", *grace)
	return nil
}

// consume declares the topology and starts the consumer of orders.
func consume(ctx context.Context, conn *acemq.Conn, log *slog.Logger) (*acemq.Consumer, error) {
	conn.OnSettle(func(s acemq.Settlement) {
		level := slog.LevelInfo
		if s.Outcome != acemq.OutcomeAcked && s.Outcome != acemq.OutcomeRetried {
			level = slog.LevelWarn
		}
		attrs := []any{"queue", s.Queue, "id", s.Envelope.ID(), "attempt", s.Envelope.Attempt(), "outcome", s.Outcome}
		if s.Where != "" {
			attrs = append(attrs, "where", s.Where, "delay", s.Delay)
		}
		if s.Reason != "" {
			attrs = append(attrs, "reason", s.Reason)
		}
		log.Log(context.Background(), level, "settled", attrs...)
	})
	return acemq.Consume(ctx, conn, "orders",
		func(ctx context.Context, m acemq.Message[Order]) acemq.Ack {
			return acemq.FromError(fulfil(ctx, m.Payload, m.Envelope.Attempt()))
		},
		acemq.WithTopology(declarations()),
		acemq.WithRetry(retry.Exponential(5, time.Second, time.Minute)),
		acemq.WithConcurrency(4),
		acemq.WithDrainTimeout(5*time.Second))
}

// fulfil stands in for the service's work: it takes a moment, and every
// fifth order meets a flaky downstream on its first attempt.
func fulfil(ctx context.Context, o Order, attempt int) error {
	select {
	case <-time.After(5 * time.Millisecond):
	case <-ctx.Done(): // the drain ran out
		return ctx.Err()
	}
	if o.Pence%500 == 0 && attempt == 1 {
		return errors.New("the warehouse did not answer")
	}
	return nil
}

// publish sends an order every period until ctx is done. A failed publish
// is logged, not fatal: the broker may be blocked or reconnecting.
func publish(ctx context.Context, conn *acemq.Conn, every time.Duration, log *slog.Logger) {
	orders := acemq.NewPublisher[Order](conn, "shop")
	tick := time.NewTicker(every)
	defer tick.Stop()
	for n := 1; ; n++ {
		select {
		case <-ctx.Done():
			return
		case <-tick.C:
		}
		o := Order{ID: fmt.Sprintf("o-%d", n), Pence: 100 * n}
		env, err := orders.Send(ctx, "order.placed", o)
		switch {
		case ctx.Err() != nil:
			return
		case err != nil:
			log.Error("publishing an order", "order", o.ID, "err", err)
		default:
			log.Info("published", "order", o.ID, "id", env.ID())
		}
	}
}

// serve starts the actuator endpoints on addr; stop ends the server and
// returns its error. Listening before anything else starts means a taken
// port stops the service at once.
func serve(addr string, ep *actuator.Endpoints, log *slog.Logger) (stop func(context.Context) error, err error) {
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("serving the actuator endpoints: %w", err)
	}
	log.Info("serving the actuator endpoints", "addr", ln.Addr().String(),
		"paths", []string{actuator.PathMetrics, actuator.PathHealth, actuator.PathInfo})
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- actuator.Serve(ctx, ln, ep) }()
	return func(ctx context.Context) error {
		cancel() // Serve gives requests in progress up to 5 s, ctx permitting
		select {
		case err := <-done:
			return err
		case <-ctx.Done():
			return fmt.Errorf("stopping the actuator endpoints: %w", ctx.Err())
		}
	}, nil
}

// origin is the origin stamped on what the service publishes: name@host.
func origin() string {
	host, err := os.Hostname()
	if err != nil {
		host = "unknown"
	}
	return name + "@" + host
}

func envOr(name, fallback string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return fallback
}
