// Package middleware provides the handler middleware people always write,
// as acemq.Middleware values for acemq.WithMiddleware: a per-handler
// timeout (Timeout), a rate limit on a token bucket (RateLimit, on
// golang.org/x/time/rate) and a line per message in a log/slog log (Log).
//
//	consumer, err := acemq.Consume(ctx, conn, "orders.new", handle,
//		acemq.WithMiddleware(
//			middleware.Log[Order](logger),           // outermost: sees the final Ack
//			middleware.RateLimit[Order](rate.NewLimiter(50, 10)),
//			middleware.Timeout[Order](5*time.Second), // innermost: bounds the handler alone
//		))
//
// There is no panic-recovery middleware: the engine recovers every panic
// of a handler, its middleware and the consume interceptors in one place,
// and dead-letters the message as a fatal failure (docs/consuming.md).
// See docs/pipeline.md for the order things run in and what each costs.
package middleware
