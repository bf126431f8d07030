package acemq

import (
	"errors"
	"fmt"
	"time"
)

// The circuit breaker (docs/pipeline.md#the-circuit-breaker): after too
// many failures the consumer pauses for a cool-down instead of spending a
// backlog's attempts on a downstream system that is down, then lets one
// delivery through as a probe and resumes when it succeeds.

// Breaker configures a consumer's circuit breaker (WithBreaker). It opens
// after ConsecutiveFailures failures in a row, or when, over the last
// Window results, the share of failures reaches FailureRate; set either or
// both. A failure is a handler's retry (Retry, or FromError with an error
// not marked Fatal) or a decode error marked retryable, for which IsFailure
// (when set) says yes. An accept is a success; a reject, park, in-progress,
// refused or panicking delivery says nothing about the downstream and is
// not counted.
type Breaker struct {
	// ConsecutiveFailures opens the breaker after this many failures in a
	// row; 0 leaves it to FailureRate.
	ConsecutiveFailures int
	// FailureRate (above 0, at most 1) opens the breaker when at least this
	// share of the last Window results were failures; 0 leaves it to
	// ConsecutiveFailures.
	FailureRate float64
	// Window is the number of recent results FailureRate is measured over
	// (at least 1 with FailureRate); the rate is judged only once Window
	// results are known.
	Window int
	// CoolDown is how long the breaker stays open before it lets a probe
	// through; positive.
	CoolDown time.Duration
	// IsFailure, when set, says whether a retry's error is the downstream's
	// failure (errors.Is(err, errStockDown), say); nil counts every retry.
	IsFailure func(err error) bool
}

// BreakerState is the state of a consumer's circuit breaker.
type BreakerState string

// The breaker's states.
const (
	// BreakerClosed: deliveries flow.
	BreakerClosed BreakerState = "closed"
	// BreakerOpen: the consumer is paused for the cool-down; a failure of
	// a delivery still running is put back unchanged, not retried.
	BreakerOpen BreakerState = "open"
	// BreakerHalfOpen: the cool-down is over; one delivery runs as a probe
	// while the others wait.
	BreakerHalfOpen BreakerState = "half_open"
)

// check refuses a breaker that makes no sense.
func (b *Breaker) check() error {
	switch {
	case b == nil:
		return nil
	case b.ConsecutiveFailures < 0:
		return fmt.Errorf("acemq: WithBreaker: ConsecutiveFailures is %d; it must be 0 (not used) or more", b.ConsecutiveFailures)
	case b.FailureRate < 0 || b.FailureRate > 1:
		return fmt.Errorf("acemq: WithBreaker: FailureRate is %v; it must be above 0 and at most 1 (or 0, not used)", b.FailureRate)
	case b.FailureRate > 0 && b.Window < 1:
		return fmt.Errorf("acemq: WithBreaker: FailureRate needs a Window of at least 1 result; it is %d", b.Window)
	case b.ConsecutiveFailures == 0 && b.FailureRate == 0:
		return errors.New("acemq: WithBreaker: set ConsecutiveFailures, or FailureRate with a Window: without either the breaker never opens")
	case b.CoolDown <= 0:
		return fmt.Errorf("acemq: WithBreaker: CoolDown is %s; it must be positive", b.CoolDown)
	}
	return nil
}

// Breaker is the state of the consumer's circuit breaker; BreakerClosed
// for a consumer without one.
func (c *Consumer) Breaker() BreakerState { return BreakerState(c.core.loop.BreakerState()) }
