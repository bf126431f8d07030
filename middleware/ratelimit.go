package middleware

import (
	"context"
	"fmt"

	"github.com/acemq/acemq"
	"golang.org/x/time/rate"
)

// RateLimit calls the handler no more often than l allows: each call first
// takes a token from l (rate.Limiter.Wait), waiting for one when the bucket
// is empty. The delivery waits with it, holding its prefetch slot and its
// worker. Share one limiter among consumers to bound them together, for
// example rate.NewLimiter(100, 10) for 100 calls a second in bursts of up
// to 10.
//
// A wait that cannot finish (the handler's context ends first, or l allows
// no call at all: a limit above 0 with a burst of 0) is a retry, and the
// handler is not called.
func RateLimit[T any](l *rate.Limiter) acemq.Middleware[T] {
	if l == nil {
		panic("middleware.RateLimit was given a nil limiter: pass rate.NewLimiter(limit, burst)")
	}
	return func(next acemq.Handler[T]) acemq.Handler[T] {
		return func(ctx context.Context, m acemq.Message[T]) acemq.Ack {
			if err := l.Wait(ctx); err != nil {
				return acemq.Retry(fmt.Errorf("the rate limit allowed no call before the context ended: %w", err))
			}
			return next(ctx, m)
		}
	}
}
