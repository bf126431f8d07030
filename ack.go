package acemq

import (
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq/internal/tuning"
	"github.com/acemq/acemq/internal/wire"
)

// Decision is what a handler asks for a delivery.
type Decision int

// The decisions a handler can return.
const (
	// DecisionAccept acknowledges the delivery.
	DecisionAccept Decision = iota
	// DecisionRetry asks for another attempt, through the retry policy.
	DecisionRetry
	// DecisionReject gives up at once: the message goes to {queue}.dlq.
	DecisionReject
	// DecisionPark sets the message aside in {queue}.parked.
	DecisionPark
	// DecisionInProgress puts the message back unchanged after a delay
	// (the work is claimed elsewhere).
	DecisionInProgress
)

// String is the decision's name: accept, retry, reject, park or
// in_progress.
func (d Decision) String() string {
	switch d {
	case DecisionAccept:
		return "accept"
	case DecisionRetry:
		return "retry"
	case DecisionReject:
		return "reject"
	case DecisionPark:
		return "park"
	case DecisionInProgress:
		return "in_progress"
	}
	return fmt.Sprintf("Decision(%d)", int(d))
}

// Ack is a handler's decision about one delivery. The zero Ack accepts.
// Build one with Accept, Retry, Reject, Park, InProgress or FromError.
type Ack struct {
	decision  Decision
	err       error
	delay     time.Duration
	chosen    bool // a retry delay the handler chose (RetryAfter)
	duplicate bool // an Accept of work already done (Duplicate)
}

// Decision is what the handler asked for.
func (a Ack) Decision() Decision { return a.decision }

// Err is the reason given with Retry, Reject or Park.
func (a Ack) Err() error { return a.err }

// Delay is the in-progress delay, or the retry delay given to RetryAfter;
// 0 for a Retry, whose wait the policy decides.
func (a Ack) Delay() time.Duration { return a.delay }

// String is the decision's name, followed by ": " and the reason when there
// is one; a Duplicate reads "accept (duplicate)".
func (a Ack) String() string {
	if a.duplicate {
		return "accept (duplicate)"
	}
	if a.err != nil {
		return a.decision.String() + ": " + a.err.Error()
	}
	return a.decision.String()
}

// Accept acknowledges the delivery: the work is done.
func Accept() Ack { return Ack{} }

// Duplicate acknowledges a delivery whose work was already done — an
// idempotent consumer (package inbox) recognised its key — without the
// handler running again. It settles like Accept, but the settlement's
// outcome is OutcomeDuplicate, counted as outcome "duplicate" on
// acemq.consume.total and marked on the process span by the event
// message.duplicate (docs/observability.md).
func Duplicate() Ack { return Ack{duplicate: true} }

// IsDuplicate reports whether the Ack came from Duplicate.
func (a Ack) IsDuplicate() bool { return a.duplicate }

// Retry asks for another attempt according to the consumer's retry policy.
// When no attempts are left (the default policy allows one), the message is
// dead-lettered to {queue}.dlq. An error marked Fatal is never retried.
func Retry(err error) Ack {
	if IsFatal(err) {
		return Ack{decision: DecisionReject, err: err}
	}
	return Ack{decision: DecisionRetry, err: orUnknown(err)}
}

// RetryAfter asks for another attempt after the handler's own delay
// instead of the policy's: use it when the cause says how long to wait,
// such as a downstream service's Retry-After. Everything else is the
// policy's, exactly as for Retry: whether to retry at all (its attempts
// and age limit; when they are spent the message is dead-lettered), and
// where the wait is held (docs/wire.md §7.5): below the policy's broker
// threshold the consumer waits d, holding the delivery; at or above it
// the copy waits on the policy's rung whose delay is the nearest at or
// above d, or on its longest rung when d exceeds them all (so the retry
// may come earlier than d). With no rung declared the consumer waits d. A
// chosen delay is not jittered — the handler asked for it — and a delay
// of zero or less retries at once. An error marked Fatal is never retried.
func RetryAfter(d time.Duration, err error) Ack {
	if IsFatal(err) {
		return Ack{decision: DecisionReject, err: err}
	}
	return Ack{decision: DecisionRetry, err: orUnknown(err), delay: max(d, 0), chosen: true}
}

// Reject gives up on the message at once: it goes to {queue}.dlq with the
// reason "the handler rejected it: …".
func Reject(err error) Ack { return Ack{decision: DecisionReject, err: orUnknown(err)} }

// Park sets the message aside in {queue}.parked with the reason
// "the handler parked it: …".
func Park(err error) Ack { return Ack{decision: DecisionPark, err: orUnknown(err)} }

// InProgress puts the message back on its queue, unchanged (same attempt),
// after delay: use it when the work is claimed by another consumer. A delay
// of zero or less uses the default of 5 s.
func InProgress(delay time.Duration) Ack {
	if delay <= 0 {
		delay = tuning.InProgressDelay
	}
	return Ack{decision: DecisionInProgress, delay: delay}
}

// FromError turns an error into a decision: nil accepts, an error marked
// Fatal rejects, any other error retries.
func FromError(err error) Ack {
	if err == nil {
		return Accept()
	}
	return Retry(err)
}

func orUnknown(err error) error {
	if err == nil {
		return errors.New("no reason given")
	}
	return err
}

// Fatal marks err as one that retrying cannot fix: a handler returning it
// (through Retry or FromError) dead-letters the message at once with the
// reason "the handler reported an unprocessable message: …". Fatal(nil) is
// nil.
func Fatal(err error) error {
	if err == nil {
		return nil
	}
	return &wire.Fatal{Err: err}
}

// IsFatal reports whether err, or an error it wraps, was marked with Fatal.
func IsFatal(err error) bool { return wire.IsFatal(err) }
