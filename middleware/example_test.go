package middleware_test

import (
	"context"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/topology"
	"golang.org/x/time/rate"
)

// A consumer whose handler is rate limited and timed out: Timeout innermost
// bounds the handler alone, not the wait for a token.
func Example() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://middleware-example")
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("orders").Apply(ctx, conn); err != nil {
		panic(err)
	}
	settled := make(chan acemq.Settlement, 1)
	conn.OnSettle(func(s acemq.Settlement) { settled <- s })
	consumer, err := acemq.Consume(ctx, conn, "orders",
		func(ctx context.Context, m acemq.Message[string]) acemq.Ack {
			<-ctx.Done() // a downstream call that hangs until the deadline
			return acemq.FromError(ctx.Err())
		},
		acemq.WithCodec(acemq.Text),
		acemq.WithMiddleware(
			middleware.RateLimit[string](rate.NewLimiter(100, 10)),
			middleware.Timeout[string](10*time.Millisecond),
		))
	if err != nil {
		panic(err)
	}
	defer consumer.Close(ctx)
	if _, err := acemq.NewPublisher[string](conn, "", acemq.WithCodec(acemq.Text)).Send(ctx, "orders", "o-1"); err != nil {
		panic(err)
	}
	s := <-settled
	fmt.Println(s.Outcome, s.Reason)
	// Output:
	// dead_lettered exhausted 1 attempts: TimeoutError: the handler did not finish within 10ms
}
