package acemq

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/tuning"
	"github.com/acemq/acemq/internal/wire"
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

	end  func(Settlement)  // ends the delivery's span
	span trace.SpanContext // the process span: the parent of the engine's republishes (tracing only)
	gen  *generation       // the subscription it came on (flow.go)
}

// The family's x-acemq-error prefixes (docs/wire.md §6.2).
const (
	reasonExhausted   = "exhausted %d attempts: "
	reasonTooOld      = "exceeded the maximum message age of %s: "
	reasonFatal       = "the handler reported an unprocessable message: "
	reasonRejected    = "the handler rejected it: "
	reasonParked      = "the handler parked it: "
	reasonUndecodable = "could not be decoded: "
	// reasonStreamRefused has no shared wording.
	reasonStreamRefused = "a stream cannot retry or put back a message, so it was parked: "
)

// process runs one delivery of g through interceptors, decode, handler and
// settlement.
func (k *consumerCore) process(d *driver.Delivery, g *generation) {
	k.state.AddUnsettled(1)
	k.inflight.Add(1)
	defer k.inflight.Add(-1)
	env := deliveryEnvelope(d)
	ctx, end := k.conn.obs.processStart(k.hctx, k.queue, d, env)
	start := time.Now()
	ack, decodeErr, refused, panicked := k.run(ctx, d, env)
	s := Settlement{Queue: k.queue, Envelope: env, Duration: time.Since(start), Redelivered: d.Redelivered, end: end, gen: g}
	if end != nil {
		s.span = trace.SpanContextFromContext(ctx)
	}
	if k.abandoned.Load() {
		// The drain ran out while the handler ran: its delivery goes back
		// when the subscription closes; republishing now could duplicate it.
		k.strand(s)
		return
	}
	if k.brk.holdBack(ack, decodeErr, refused, panicked) {
		// The circuit breaker is open (or this failure opened it): the
		// downstream is failing, not the message (breaker.go).
		k.brk.putBack(d, ack, decodeErr, &s)
		k.finish(s)
		return
	}
	switch {
	case panicked != nil:
		s.Decision = DecisionReject
		s.Err = panicked
		k.setAside(d, env, &s, wire.DeadLetterQueue(k.queue), reasonFatal+wire.Describe(panicked), OutcomeRejected)
	case refused != nil:
		s.Decision = DecisionReject
		s.Err = refused
		k.setAside(d, env, &s, wire.DeadLetterQueue(k.queue), refusedReason(refused), OutcomeRejected)
	case decodeErr != nil:
		s.Err = decodeErr
		var de *DecodeError
		if errors.As(decodeErr, &de) && de.Retryable && k.stream == nil {
			s.Decision = DecisionRetry
			if k.retry(d, env, &s) {
				return
			}
			break
		}
		s.Decision = DecisionPark
		k.setAside(d, env, &s, wire.ParkedQueue(k.queue), undecodableReason(decodeErr), OutcomeParked)
	default:
		s.Decision = ack.decision
		s.Err = ack.err
		if k.stream != nil && k.settleFromStream(d, env, &s, ack) {
			break
		}
		switch ack.decision {
		case DecisionAccept:
			if err := d.Ack(); err != nil {
				s.Outcome = OutcomeRequeued
				s.SettleErr = err
			} else if ack.duplicate {
				s.Outcome = OutcomeDuplicate
			} else {
				s.Outcome = OutcomeAcked
			}
		case DecisionRetry:
			if k.retryWith(d, env, &s, ack) {
				return
			}
		case DecisionReject:
			if IsFatal(ack.err) {
				k.setAside(d, env, &s, wire.DeadLetterQueue(k.queue), reasonFatal+wire.Describe(ack.err), OutcomeRejected)
			} else {
				k.setAside(d, env, &s, wire.DeadLetterQueue(k.queue), reasonRejected+wire.Describe(ack.err), OutcomeRejected)
			}
		case DecisionPark:
			k.setAside(d, env, &s, wire.ParkedQueue(k.queue), reasonParked+wire.Describe(ack.err), OutcomeParked)
		case DecisionInProgress:
			s.Delay = ack.delay
			s.Where = WhereConsumer
			// The closure captures copies made here, so that only a
			// delivery put back for later moves them to the heap, not
			// every delivery.
			env, held := env, *d
			k.later(ack.delay, s, func(s *Settlement) {
				k.republish(&held, env, k.queue, s, OutcomeInProgress)
			})
			return
		default:
			k.setAside(d, env, &s, wire.DeadLetterQueue(k.queue), reasonRejected+fmt.Sprintf("unknown decision %d", ack.decision), OutcomeRejected)
		}
	}
	if k.stream != nil && s.Outcome != OutcomeRequeued {
		if off, ok := d.StreamOffset(); ok {
			k.stream.Settled(off)
		}
	}
	k.finish(s)
}

// finish records a settled delivery.
func (k *consumerCore) finish(s Settlement) {
	k.state.AddUnsettled(-1)
	if s.gen != nil {
		s.gen.settled()
	}
	k.conn.emitSettlement(s)
}

// strand records a delivery left unsettled because the drain ran out.
func (k *consumerCore) strand(s Settlement) {
	s.Outcome = OutcomeRequeued
	s.Err = errors.Join(s.Err, errStranded)
	k.finish(s)
}

// cutReason returns reason cut to contract.MaxErrorHeaderBytes on a UTF-8 boundary,
// marked with its full length.
func cutReason(reason string) string { return engine.CutReason(reason, wire.MaxErrorHeaderBytes) }

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

// retry applies the retry policy to a failed delivery. It reports whether
// the settlement was deferred to a wait in the consumer (which then emits it).
func (k *consumerCore) retry(d *driver.Delivery, env Envelope, s *Settlement) (deferred bool) {
	return k.retryWith(d, env, s, Ack{})
}

// retryWith is retry with the handler's decision, whose chosen delay
// (RetryAfter) replaces the policy's.
func (k *consumerCore) retryWith(d *driver.Delivery, env Envelope, s *Settlement, ack Ack) (deferred bool) {
	p := k.cfg.retry
	age, known := env.Age()
	if !p.shouldRetry(env.attempt, age, known) {
		var reason string
		if env.attempt >= p.maxAttempts {
			reason = fmt.Sprintf(reasonExhausted, p.maxAttempts)
		} else {
			reason = fmt.Sprintf(reasonTooOld, p.maxAge)
		}
		k.setAside(d, env, s, wire.DeadLetterQueue(k.queue), reason+wire.Describe(s.Err), OutcomeDeadLettered)
		return false
	}
	s.Reason = wire.Describe(s.Err)
	delay := p.delayAfter(env.attempt)
	inBroker := p.waitsInBroker(delay)
	if ack.chosen {
		delay, inBroker = p.chosenDelay(ack.delay)
	}
	s.Delay = delay
	next := env.next()
	if inBroker {
		rung := wire.RungQueue(k.queue, delay)
		s.Where = WhereBroker
		err := k.publishCopy(d, next, rung, s)
		var ue *driver.ReturnError
		switch {
		case err == nil:
			k.settleAck(d, s, rung, OutcomeRetried)
			return false
		case errors.As(err, &ue):
			// The rung is missing: count it and wait in the consumer.
			s.RungMissing = rung
		default:
			k.requeue(d, s, err)
			return false
		}
	}
	s.Where = WhereConsumer
	wait := p.jittered(delay)
	if ack.chosen {
		wait = max(delay, time.Millisecond) // the handler's own delay is not jittered
	}
	s.Delay = wait
	held := *d // the closure's own copy: d stays where its worker has it
	k.later(wait, *s, func(s *Settlement) { k.republish(&held, next, k.queue, s, OutcomeRetried) })
	return true
}

// later waits without holding a worker (the delivery stays unacknowledged,
// holding its prefetch slot), on the connection's clock, then runs settle
// and records the settlement. A consumer that closes meanwhile cuts the
// wait short, so every delivery is settled before the drain ends.
func (k *consumerCore) later(wait time.Duration, s Settlement, settle func(*Settlement)) {
	k.waits.Add(1)
	// timed counts the waits still to come on the clock, for acemqtest's
	// WaitIdle under a test clock; one of no time is not waiting for it.
	timed := int64(0)
	if wait > 0 {
		timed = 1
	}
	k.state.AddWaiting(timed)
	due := make(chan struct{})
	t := k.conn.Clock().AfterFunc(wait, func() {
		k.state.AddWaiting(-timed)
		close(due)
	})
	go func() {
		defer k.waits.Done()
		select {
		case <-due:
		case <-k.stopping:
			if t.Stop() {
				k.state.AddWaiting(-timed)
			}
		}
		if k.abandoned.Load() {
			k.strand(s)
			return
		}
		settle(&s)
		k.finish(s)
	}()
}

// republish sends a copy of the delivery (same body, content type and id;
// env's headers) to target through the default exchange and acks the
// original once the copy is confirmed and routed.
func (k *consumerCore) republish(d *driver.Delivery, env Envelope, target string, s *Settlement, outcome Outcome) {
	if !d.CanSettle() {
		// The channel went away during the wait: the broker redelivers the
		// original (same attempt), so a copy now would run the message twice.
		s.Outcome = OutcomeRequeued
		s.Where = WhereRequeued
		s.SettleErr = driver.ErrChannelClosed
		return
	}
	if err := k.publishCopy(d, env, target, s); err != nil {
		k.requeue(d, s, err)
		return
	}
	k.settleAck(d, s, target, outcome)
}

func (k *consumerCore) setAside(d *driver.Delivery, env Envelope, s *Settlement, target, reason string, outcome Outcome) {
	s.Reason = reason
	env = env.withReason(cutReason(reason))
	err := k.publishCopy(d, env, target, s)
	if k.stream != nil {
		k.setAsideFromStream(d, env, s, target, outcome, err)
		return
	}
	var ue *driver.ReturnError
	switch {
	case err == nil:
		k.settleAck(d, s, target, outcome)
	case errors.As(err, &ue):
		// The target is missing: count it and put the message back, never
		// drop it (docs/wire.md §6.1).
		s.SetAsideFailed = target
		k.requeue(d, s, err)
	default:
		k.requeue(d, s, err)
	}
}

// settleFromStream settles the decisions a stream settles its own way and
// reports whether ack's was one of them: Accept, whose ack only frees the
// prefetch slot (on a channel that is gone it fails, which changes
// nothing), and Retry and InProgress, refused since a stream cannot
// redeliver: the message is parked with a reason saying so.
func (k *consumerCore) settleFromStream(d *driver.Delivery, env Envelope, s *Settlement, ack Ack) bool {
	switch ack.decision {
	case DecisionAccept:
		_ = d.Ack()
		s.Outcome = OutcomeAcked
	case DecisionRetry, DecisionInProgress:
		if s.Err == nil {
			s.Err = errors.New(ack.decision.String() + " requested")
		}
		k.setAside(d, env, s, wire.ParkedQueue(k.queue), reasonStreamRefused+wire.Describe(s.Err), OutcomeParked)
	default:
		return false
	}
	return true
}

// setAsideFromStream finishes a set-aside from a stream whose first copy
// returned err. A copy that failed is tried again, waiting longer each
// time, until it is made or the consumer closes: on a stream the original
// cannot be put back, and moving on would lose it from the set-aside queue.
// When the consumer closes first, the delivery is left unsettled and the
// reader's position stays before it.
func (k *consumerCore) setAsideFromStream(d *driver.Delivery, env Envelope, s *Settlement, target string, outcome Outcome, err error) {
	wait := 100 * time.Millisecond
	for err != nil {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-k.stopping:
			t.Stop()
			s.Outcome = OutcomeRequeued
			s.SettleErr = fmt.Errorf("acemq: the reader of %q closed before it could copy offset %v to %s: %w", k.queue, d.Headers[driver.StreamOffsetHeader], target, err)
			return
		}
		wait = min(2*wait, 5*time.Second)
		err = k.publishCopy(d, env, target, s)
	}
	k.settleAck(d, s, target, outcome)
	// The ack only frees the prefetch slot (see process).
	s.SettleErr = nil
}

func (k *consumerCore) settleAck(d *driver.Delivery, s *Settlement, target string, outcome Outcome) {
	s.Target = target
	s.Outcome = outcome
	if err := d.Ack(); err != nil {
		// The channel went away after the copy was confirmed: the broker
		// redelivers the original, so the message may be seen twice.
		s.SettleErr = err
	}
}

// requeue puts the delivery back on its queue unchanged after a republish
// failed with err. It is a reject with requeue, not a nack: the delivery
// was processed and its settlement failed, so a quorum queue counts it
// toward its delivery limit on every broker version, and a copy that can
// never be published (one too big for a frame, say) ends in the queue's
// dead-letter target instead of coming back for ever (docs/reliability.md).
func (k *consumerCore) requeue(d *driver.Delivery, s *Settlement, err error) {
	s.Outcome = OutcomeRequeued
	s.SettleErr = err
	if s.Where != "" {
		s.Where = WhereRequeued
	}
	if nerr := d.Reject(true); nerr != nil {
		s.SettleErr = errors.Join(err, nerr)
	}
}

// publishCopy republishes the original delivery's bytes with env's headers
// to queue through the default exchange: persistent, mandatory, confirmed,
// within the detached settlement deadline.
func (k *consumerCore) publishCopy(d *driver.Delivery, env Envelope, queue string, s *Settlement) error {
	ctx, cancel := context.WithTimeout(context.Background(), tuning.SettlementDeadline)
	defer cancel()
	m := engine.Copy(d, queue, env.AppendHeaders(nil, d.RoutingKey), env.id)
	return k.conn.publish(k.conn.obs.within(ctx, s.span), m, env)
}

// declareDeadLetterHalf declares what starting a consumer of q declares
// (docs/wire.md §5.4): acemq.dlx, {q}.dlq, {q}.parked and their bindings, and
// when the policy has broker waits, acemq.retry, the rungs and the return
// binding. Never q itself.
func declareDeadLetterHalf(ctx context.Context, t driver.Conn, q string, p RetryPolicy) error {
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
