package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/topology"
)

// A publish interceptor stamps a header on every application publish of the
// connection; a consume interceptor refuses deliveries without it, which
// dead-letters them with the reason "an interceptor refused it: …".
func ExampleWithPublishInterceptors() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-interceptors",
		acemq.WithPublishInterceptors(func(_ context.Context, p *acemq.Publishing) error {
			return p.SetHeader("tenant", "acme")
		}))
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("greetings").Apply(ctx, conn); err != nil {
		panic(err)
	}
	settled := make(chan acemq.Settlement, 1)
	conn.OnSettle(func(s acemq.Settlement) { settled <- s })
	consumer, err := acemq.Consume(ctx, conn, "greetings",
		func(_ context.Context, m acemq.Message[string]) acemq.Ack {
			fmt.Println("handled", m.Payload, "for", m.Envelope.Headers()["tenant"])
			return acemq.Accept()
		},
		acemq.WithCodec(acemq.Text),
		acemq.WithConsumeInterceptors(func(ctx context.Context, d acemq.Message[[]byte]) (context.Context, error) {
			if _, ok := d.Envelope.Header("tenant"); !ok {
				return nil, errors.New("no tenant")
			}
			return ctx, nil
		}))
	if err != nil {
		panic(err)
	}
	defer consumer.Close(ctx)
	if _, err := acemq.NewPublisher[string](conn, "", acemq.WithCodec(acemq.Text)).Send(ctx, "greetings", "hello"); err != nil {
		panic(err)
	}
	fmt.Println((<-settled).Outcome)
	// Output:
	// handled hello for acme
	// acked
}

// Middleware wraps the handler; the first given runs outermost.
func ExampleWithMiddleware() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-middleware")
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("words").Apply(ctx, conn); err != nil {
		panic(err)
	}
	upper := func(next acemq.Handler[string]) acemq.Handler[string] {
		return func(ctx context.Context, m acemq.Message[string]) acemq.Ack {
			m.Payload = strings.ToUpper(m.Payload)
			return next(ctx, m)
		}
	}
	trace := func(next acemq.Handler[string]) acemq.Handler[string] {
		return func(ctx context.Context, m acemq.Message[string]) acemq.Ack {
			fmt.Println("before", m.Payload)
			ack := next(ctx, m)
			fmt.Println("after:", ack.Decision())
			return ack
		}
	}
	done := make(chan struct{})
	consumer, err := acemq.Consume(ctx, conn, "words",
		func(_ context.Context, m acemq.Message[string]) acemq.Ack {
			fmt.Println("handler", m.Payload)
			return acemq.Accept()
		},
		acemq.WithCodec(acemq.Text),
		acemq.WithMiddleware(trace, upper))
	if err != nil {
		panic(err)
	}
	conn.OnSettle(func(acemq.Settlement) { close(done) })
	if _, err := acemq.NewPublisher[string](conn, "", acemq.WithCodec(acemq.Text)).Send(ctx, "words", "hi"); err != nil {
		panic(err)
	}
	<-done
	_ = consumer.Close(ctx)
	// Output:
	// before hi
	// handler HI
	// after: accept
}

// Pause stops a consumer taking deliveries without closing it; what
// arrives meanwhile waits on the queue.
func ExampleConsumer_Pause() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-pause")
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("jobs").Apply(ctx, conn); err != nil {
		panic(err)
	}
	handled := make(chan string, 1)
	consumer, err := acemq.Consume(ctx, conn, "jobs",
		func(_ context.Context, m acemq.Message[string]) acemq.Ack {
			handled <- m.Payload
			return acemq.Accept()
		},
		acemq.WithCodec(acemq.Text))
	if err != nil {
		panic(err)
	}
	defer consumer.Close(ctx)
	if err := consumer.Pause(ctx); err != nil {
		panic(err)
	}
	if _, err := acemq.NewPublisher[string](conn, "", acemq.WithCodec(acemq.Text)).Send(ctx, "jobs", "job-1"); err != nil {
		panic(err)
	}
	info, _ := queues.Inspect(ctx, conn, "jobs")
	fmt.Println("paused:", consumer.Paused(), "waiting:", info.Messages)
	if err := consumer.Resume(ctx); err != nil {
		panic(err)
	}
	fmt.Println("handled", <-handled)
	// Output:
	// paused: true waiting: 1
	// handled job-1
}
