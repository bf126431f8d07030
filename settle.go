package acemq

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
	"go.opentelemetry.io/otel/trace"
)

// Outcome is what the engine did with a delivery, as the family's metrics
// and spans name it.
type Outcome string

// The consume outcomes (docs/wire.md §10.3).
const (
	OutcomeAcked        Outcome = "acked"
	OutcomeRetried      Outcome = "retried"
	OutcomeRejected     Outcome = "rejected"
	OutcomeDeadLettered Outcome = "dead_lettered"
	OutcomeParked       Outcome = "parked"
	OutcomeInProgress   Outcome = "in_progress"
	// OutcomeDuplicate: the handler answered Duplicate (an idempotent
	// consumer recognised work already done) and the delivery was
	// acknowledged. This library's addition to the family's consume
	// outcomes (docs/wire.md §10.3).
	OutcomeDuplicate Outcome = "duplicate"
	// OutcomeRequeued: the delivery was put back on its queue unchanged
	// (a set-aside target or its own queue was missing, a republish was not
	// confirmed, the consumer's drain ran out while its handler ran, or its
	// failure opened the consumer's circuit breaker or came while it was
	// open). It
	// is not a family outcome and is not counted in acemq.consume.total.
	OutcomeRequeued Outcome = "requeued"
)

// Where says where the wait of a retry or an in-progress put-back was held,
// as the where tag of acemq.messages.retried.total names it.
type Where string

// The places a wait is held.
const (
	// WhereConsumer: the consumer held the delivery (unacknowledged) for
	// the wait, then republished it.
	WhereConsumer Where = "consumer"
	// WhereBroker: the copy waited on a broker rung queue.
	WhereBroker Where = "broker"
	// WhereRequeued: the republish failed and the delivery was put back on
	// its queue instead.
	WhereRequeued Where = "requeued"
)

// Settlement records what happened to one delivery. The engine emits one per
// settled delivery; metrics, spans and OnSettle listeners all read it.
type Settlement struct {
	Queue    string
	Envelope Envelope
	// Decision is what the handler asked: DecisionReject for a panic or a
	// delivery a consume interceptor refused;
	// DecisionPark for a body that could not be decoded (the handler never
	// saw it), or DecisionRetry when the codec said retrying could help.
	Decision Decision
	// Outcome is what the engine did: a retry on the last attempt is
	// OutcomeDeadLettered.
	Outcome Outcome
	// Where is where the wait of a retry or an in-progress put-back was
	// held: WhereConsumer, WhereBroker, or WhereRequeued when the republish
	// failed and the delivery was put back instead.
	Where Where
	// Target is the queue the message was republished to, if any.
	Target string
	// Delay is the wait chosen for a retry or in-progress put-back: exactly
	// the scheduled delay when held on a rung, the jittered wait when held
	// in the consumer.
	Delay time.Duration
	// Reason is the x-acemq-error written on a set-aside copy, or the
	// retry's cause.
	Reason string
	// Err is the handler's (or decoder's) error.
	Err error
	// SettleErr is the broker failure that stopped the decision's actions:
	// a republish that was refused, lost or unroutable, or an ack that
	// failed. The delivery was put back (Outcome OutcomeRequeued) or, when
	// only the ack failed, will be redelivered by the broker.
	SettleErr error
	// Duration is the time spent decoding and in the handler.
	Duration time.Duration
	// RungMissing names the rung found missing, whose wait moved to the
	// consumer.
	RungMissing string
	// SetAsideFailed names the set-aside target that was missing; the
	// message was put back.
	SetAsideFailed string
	// Redelivered is the broker's flag on the delivery.
	Redelivered bool

	end func(Settlement) // ends the delivery's span
}

// reasonUndecodable prefixes the x-acemq-error of a parked undecodable
// body (docs/wire.md §6.2); the consume engine writes the other reasons.
const reasonUndecodable = "could not be decoded: "

// delivered is what the consume engine carries of a delivery for package
// acemq between its dispatch and its settlement: the envelope read from
// its headers, and the end of its process span (nil without tracing).
type delivered struct {
	env Envelope
	end func(Settlement)
}

// dispatcher is the consume engine's dispatch of k: it reads the
// delivery's envelope, starts its process span, runs the interceptors,
// decode and the handler (run), and turns what they gave into the
// engine's verdict. (A closure, not the method value of a method: a method
// value's wrapper would copy the delivery and the verdict once more for
// every message.)
func (k *consumerCore) dispatcher() func(ctx context.Context, d driver.Delivery) engine.Verdict[delivered] {
	return func(ctx context.Context, d driver.Delivery) engine.Verdict[delivered] {
		env := deliveryEnvelope(&d)
		ctx, end := k.conn.obs.processStart(ctx, k.queue, &d, env)
		start := time.Now()
		ack, decodeErr, refused, panicked := k.run(ctx, &d, env)
		v := engine.Verdict[delivered]{Env: delivered{env, end}, Duration: time.Since(start)}
		if end != nil {
			v.Span = trace.SpanContextFromContext(ctx)
		}
		switch {
		case panicked != nil:
			v.Fail, v.Err = engine.Panicked, panicked
		case refused != nil:
			v.Fail, v.Err, v.Reason = engine.Refused, refused, refusedReason(refused)
		case decodeErr != nil:
			v.Fail, v.Err, v.Reason = engine.Undecodable, decodeErr, undecodableReason(decodeErr)
			var de *DecodeError
			v.Retryable = errors.As(decodeErr, &de) && de.Retryable
		default:
			v.Decision, v.Err, v.Delay = engine.Decision(ack.decision), ack.err, ack.delay
			v.Chosen, v.Duplicate = ack.chosen, ack.duplicate
		}
		return v
	}
}

// emitter is the consume engine's emit of k: a settlement becomes the
// public Settlement, recorded on its span, in the metrics and log, and
// handed to the OnSettle listeners. (A closure, as dispatcher is.)
func (k *consumerCore) emitter() func(engine.Settlement[delivered]) {
	return func(s engine.Settlement[delivered]) {
		k.conn.emitSettlement(Settlement{
			Queue: s.Queue, Envelope: s.Env.env, Decision: Decision(s.Decision), Outcome: Outcome(s.Outcome), Where: Where(s.Where),
			Target: s.Target, Delay: s.Delay, Reason: s.Reason, Err: s.Err, SettleErr: s.SettleErr, Duration: s.Duration,
			RungMissing: s.RungMissing, SetAsideFailed: s.SetAsideFailed, Redelivered: s.Redelivered, end: s.Env.end,
		})
	}
}

// copyOf is the consume engine's Copy: the headers, message id and span
// identity of a republished copy of a delivery of e's envelope.
func copyOf(e delivered, routingKey string, c engine.Change, reason string) (driver.Table, string, engine.Identity) {
	env := e.env
	switch c {
	case engine.Next:
		env = env.next()
	case engine.Reasoned:
		env = env.withReason(reason)
	}
	return env.AppendHeaders(nil, routingKey), env.id, identity(&env)
}

// attemptOf is the consume engine's Attempt: e's attempt and age.
func attemptOf(e delivered) (int, time.Duration, bool) {
	age, known := e.env.Age()
	return e.env.attempt, age, known
}

// PanicError is the error recorded for a handler that panicked; the
// message is dead-lettered as a fatal failure.
type PanicError struct {
	// Value is what the handler panicked with.
	Value any
	// Stack is the handler goroutine's stack at the panic.
	Stack []byte
}

// Error is "panic: " and the recovered value.
func (p *PanicError) Error() string { return fmt.Sprintf("panic: %v", p.Value) }

// run runs the consume interceptors, then decode and the handler (with its
// middleware). A panic anywhere among them is recovered here, the one
// place the engine recovers panics: it is a fatal reject.
func (k *consumerCore) run(ctx context.Context, d *driver.Delivery, env Envelope) (ack Ack, decodeErr, refused, panicked error) {
	defer func() {
		if r := recover(); r != nil {
			panicked = &PanicError{Value: r, Stack: debug.Stack()}
		}
	}()
	if len(k.intercept) > 0 {
		if ctx, refused = k.interceptConsume(ctx, d, env); refused != nil {
			return Ack{}, nil, refused, nil
		}
	}
	ack, decodeErr = k.handle(ctx, *d, env)
	return ack, decodeErr, nil, nil
}

// declareDeadLetterHalf declares what starting a consumer of q declares
// (docs/wire.md §5.4): acemq.dlx, {q}.dlq, {q}.parked and their bindings, and
// when the policy has broker waits, acemq.retry, the rungs and the return
// binding. Never q itself.
func declareDeadLetterHalf(ctx context.Context, t driver.Conn, q string, p retry.Policy) error {
	for _, step := range consumerDeclarations(q, p) {
		if err := step.Declare(ctx, t); err != nil {
			return fmt.Errorf("acemq: the consumer of %q could not declare its dead-letter half: %w", q, err)
		}
	}
	return nil
}

// undecodableReason is the x-acemq-error of a parked undecodable body:
// the prefix, then the codec's own error as TypeName: message, then the
// content type. A *DecodeError is unwrapped, so its prose ("could not decode
// a body") does not repeat the prefix's.
func undecodableReason(err error) string {
	var de *DecodeError
	if !errors.As(err, &de) || de.Err == nil {
		return reasonUndecodable + wire.Describe(err)
	}
	ct := de.ContentType
	if ct == "" {
		ct = "none"
	}
	return reasonUndecodable + wire.Describe(de.Err) + " (content type " + ct + ")"
}
