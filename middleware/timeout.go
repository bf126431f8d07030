package middleware

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
)

// TimeoutError is the error of the retry a Timeout returns for a handler
// that ran past its time.
type TimeoutError struct {
	// After is the time the handler was given.
	After time.Duration
}

// Error says how long the handler was given.
func (e *TimeoutError) Error() string {
	return fmt.Sprintf("the handler did not finish within %s", e.After)
}

// Timeout gives each call of the handler d: its context ends d after the
// call starts (with a *TimeoutError as its cause), and when d has passed by
// the time the handler returns, the result is acemq.Retry of that
// *TimeoutError, whatever the handler decided, so the retry policy decides
// what follows. A handler that returns in time keeps its own Ack.
//
// Go cannot stop a goroutine: a handler that ignores its context runs on to
// its end, holding its worker and its delivery until then, and is retried
// after it returns (its work may then have been done; make handlers
// idempotent). Timeout does not abandon it to run beside its own retry.
// A context the engine ends for its own reason (a drain that ran out)
// leaves the handler's Ack as it is. d must be positive; Timeout panics
// otherwise, as time.NewTicker does.
func Timeout[T any](d time.Duration) acemq.Middleware[T] {
	if d <= 0 {
		panic(fmt.Sprintf("middleware.Timeout(%s): the time must be positive", d))
	}
	return func(next acemq.Handler[T]) acemq.Handler[T] {
		return func(ctx context.Context, m acemq.Message[T]) acemq.Ack {
			cause := &TimeoutError{After: d}
			ctx, cancel := context.WithTimeoutCause(ctx, d, cause)
			defer cancel()
			ack := next(ctx, m)
			if ctx.Err() != nil && errors.Is(context.Cause(ctx), cause) {
				return acemq.Retry(cause)
			}
			return ack
		}
	}
}
