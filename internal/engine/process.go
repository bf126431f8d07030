package engine

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/tuning"
	"github.com/acemq/acemq/internal/wire"
	"go.opentelemetry.io/otel/trace"
)

// The family's x-acemq-error prefixes (docs/wire.md §6.2) the engine
// writes; package acemq writes those of refused and undecodable
// deliveries.
const (
	reasonExhausted = "exhausted %d attempts: "
	reasonTooOld    = "exceeded the maximum message age of %s: "
	// ReasonFatal prefixes the reason of an unprocessable message.
	ReasonFatal    = "the handler reported an unprocessable message: "
	reasonRejected = "the handler rejected it: "
	reasonParked   = "the handler parked it: "
	// reasonStreamRefused has no shared wording.
	reasonStreamRefused = "a stream cannot retry or put back a message, so it was parked: "
)

// process runs one delivery of g through the dispatch and settles it.
func (k *Loop[E]) process(d *driver.Delivery, g *generation) {
	k.state.AddUnsettled(1)
	k.inflight.Add(1)
	defer k.inflight.Add(-1)
	v := k.h.Dispatch(k.hctx, *d)
	s := Settlement[E]{Queue: k.queue, Env: v.Env, Duration: v.Duration, Redelivered: d.Redelivered, span: v.Span, gen: g}
	if k.abandoned.Load() {
		// The drain ran out while the handler ran: its delivery goes back
		// when the subscription closes; republishing now could duplicate it.
		k.strand(&s)
		return
	}
	if k.brk.holdBack(failure{v.Fail, v.Retryable, v.Decision, v.Err}) {
		// The circuit breaker is open (or this failure opened it): the
		// downstream is failing, not the message (breaker.go).
		k.putBack(d, &s, v.Err)
		k.finish(&s)
		return
	}
	switch v.Fail {
	case Panicked:
		s.Decision = Reject
		s.Err = v.Err
		k.setAside(d, &s, wire.DeadLetterQueue(k.queue), ReasonFatal+wire.Describe(v.Err), Rejected)
	case Refused:
		s.Decision = Reject
		s.Err = v.Err
		k.setAside(d, &s, wire.DeadLetterQueue(k.queue), v.Reason, Rejected)
	case Undecodable:
		s.Err = v.Err
		if v.Retryable && k.stream == nil {
			s.Decision = Retry
			if k.retry(d, &s, &v) {
				return
			}
			break
		}
		s.Decision = Park
		k.setAside(d, &s, wire.ParkedQueue(k.queue), v.Reason, Parked)
	default:
		s.Decision = v.Decision
		s.Err = v.Err
		if k.stream != nil && k.settleFromStream(d, &s, v.Decision) {
			break
		}
		switch v.Decision {
		case Accept:
			if err := d.Ack(); err != nil {
				s.Outcome = Requeued
				s.SettleErr = err
			} else if v.Duplicate {
				s.Outcome = Duplicate
			} else {
				s.Outcome = Acked
			}
		case Retry:
			if k.retry(d, &s, &v) {
				return
			}
		case Reject:
			if wire.IsFatal(v.Err) {
				k.setAside(d, &s, wire.DeadLetterQueue(k.queue), ReasonFatal+wire.Describe(v.Err), Rejected)
			} else {
				k.setAside(d, &s, wire.DeadLetterQueue(k.queue), reasonRejected+wire.Describe(v.Err), Rejected)
			}
		case Park:
			k.setAside(d, &s, wire.ParkedQueue(k.queue), reasonParked+wire.Describe(v.Err), Parked)
		case InProgress:
			s.Delay = v.Delay
			s.Where = InConsumer
			// The closure captures a copy made here, so that only a
			// delivery put back for later moves it to the heap, not every
			// delivery.
			held := *d
			k.later(v.Delay, s, func(s *Settlement[E]) {
				k.republish(&held, Same, k.queue, s, PutBack)
			})
			return
		default:
			k.setAside(d, &s, wire.DeadLetterQueue(k.queue), reasonRejected+fmt.Sprintf("unknown decision %d", v.Decision), Rejected)
		}
	}
	if k.stream != nil && s.Outcome != Requeued {
		if off, ok := d.StreamOffset(); ok {
			k.stream.Settled(off)
		}
	}
	k.finish(&s)
}

// finish records a settled delivery. s goes by pointer: a settlement is
// large, and each copy of it costs every delivery.
func (k *Loop[E]) finish(s *Settlement[E]) {
	k.state.AddUnsettled(-1)
	if s.gen != nil {
		s.gen.settled()
	}
	k.h.Emit(*s)
}

// strand records a delivery left unsettled because the drain ran out.
func (k *Loop[E]) strand(s *Settlement[E]) {
	s.Outcome = Requeued
	s.Err = errors.Join(s.Err, errStranded)
	k.finish(s)
}

// retry applies the retry policy to a failed delivery; a handler's chosen
// delay (RetryAfter) replaces the policy's. It reports whether the
// settlement was deferred to a wait in the consumer (which then emits it).
func (k *Loop[E]) retry(d *driver.Delivery, s *Settlement[E], v *Verdict[E]) (deferred bool) {
	p := k.cfg.Retry
	attempt, age, known := k.h.Attempt(s.Env)
	if !p.ShouldRetry(attempt, age, known) {
		var reason string
		if attempt >= p.MaxAttempts {
			reason = fmt.Sprintf(reasonExhausted, p.MaxAttempts)
		} else {
			reason = fmt.Sprintf(reasonTooOld, p.MaxAge)
		}
		k.setAside(d, s, wire.DeadLetterQueue(k.queue), reason+wire.Describe(s.Err), DeadLettered)
		return false
	}
	s.Reason = wire.Describe(s.Err)
	delay := p.DelayAfter(attempt)
	inBroker := p.WaitsInBroker(delay)
	chosen := v.Fail == Handled && v.Chosen
	if chosen {
		delay, inBroker = p.ChosenDelay(v.Delay)
	}
	s.Delay = delay
	if inBroker {
		rung := wire.RungQueue(k.queue, delay)
		s.Where = InBroker
		err := k.publishCopy(d, s, Next, "", rung)
		var ue *driver.ReturnError
		switch {
		case err == nil:
			k.settleAck(d, s, rung, Retried)
			return false
		case errors.As(err, &ue):
			// The rung is missing: count it and wait in the consumer.
			s.RungMissing = rung
		default:
			k.requeue(d, s, err)
			return false
		}
	}
	s.Where = InConsumer
	wait := p.Jittered(delay)
	if chosen {
		wait = max(delay, time.Millisecond) // the handler's own delay is not jittered
	}
	s.Delay = wait
	held := *d // the closure's own copy: d stays where its worker has it
	k.later(wait, *s, func(s *Settlement[E]) { k.republish(&held, Next, k.queue, s, Retried) })
	return true
}

// later waits without holding a worker (the delivery stays unacknowledged,
// holding its prefetch slot), on the connection's clock, then runs settle
// and records the settlement. A consumer that closes meanwhile cuts the
// wait short, so every delivery is settled before the drain ends.
func (k *Loop[E]) later(wait time.Duration, s Settlement[E], settle func(*Settlement[E])) {
	k.waits.Add(1)
	// timed counts the waits still to come on the clock, for acemqtest's
	// WaitIdle under a test clock; one of no time is not waiting for it.
	timed := int64(0)
	if wait > 0 {
		timed = 1
	}
	k.state.AddWaiting(timed)
	due := make(chan struct{})
	t := k.cfg.Clock.AfterFunc(wait, func() {
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
			k.strand(&s)
			return
		}
		settle(&s)
		k.finish(&s)
	}()
}

// republish sends a copy of the delivery (same body, content type and id;
// its envelope changed as c says) to target through the default exchange
// and acks the original once the copy is confirmed and routed.
func (k *Loop[E]) republish(d *driver.Delivery, c Change, target string, s *Settlement[E], outcome Outcome) {
	if !d.CanSettle() {
		// The channel went away during the wait: the broker redelivers the
		// original (same attempt), so a copy now would run the message twice.
		s.Outcome = Requeued
		s.Where = WhereRequeued
		s.SettleErr = driver.ErrChannelClosed
		return
	}
	if err := k.publishCopy(d, s, c, "", target); err != nil {
		k.requeue(d, s, err)
		return
	}
	k.settleAck(d, s, target, outcome)
}

func (k *Loop[E]) setAside(d *driver.Delivery, s *Settlement[E], target, reason string, outcome Outcome) {
	s.Reason = reason
	cut := CutReason(reason, wire.MaxErrorHeaderBytes)
	err := k.publishCopy(d, s, Reasoned, cut, target)
	if k.stream != nil {
		k.setAsideFromStream(d, s, cut, target, outcome, err)
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
// reports whether decision was one of them: Accept, whose ack only frees
// the prefetch slot (on a channel that is gone it fails, which changes
// nothing), and Retry and InProgress, refused since a stream cannot
// redeliver: the message is parked with a reason saying so.
func (k *Loop[E]) settleFromStream(d *driver.Delivery, s *Settlement[E], decision Decision) bool {
	switch decision {
	case Accept:
		_ = d.Ack()
		s.Outcome = Acked
	case Retry, InProgress:
		if s.Err == nil {
			name := "retry"
			if decision == InProgress {
				name = "in_progress"
			}
			s.Err = errors.New(name + " requested")
		}
		k.setAside(d, s, wire.ParkedQueue(k.queue), reasonStreamRefused+wire.Describe(s.Err), Parked)
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
func (k *Loop[E]) setAsideFromStream(d *driver.Delivery, s *Settlement[E], reason, target string, outcome Outcome, err error) {
	wait := 100 * time.Millisecond
	for err != nil {
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-k.stopping:
			t.Stop()
			s.Outcome = Requeued
			s.SettleErr = fmt.Errorf("the reader of %q closed before it could copy offset %v to %s: %w", k.queue, d.Headers[driver.StreamOffsetHeader], target, err)
			return
		}
		wait = min(2*wait, 5*time.Second)
		err = k.publishCopy(d, s, Reasoned, reason, target)
	}
	k.settleAck(d, s, target, outcome)
	// The ack only frees the prefetch slot (see process).
	s.SettleErr = nil
}

func (k *Loop[E]) settleAck(d *driver.Delivery, s *Settlement[E], target string, outcome Outcome) {
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
func (k *Loop[E]) requeue(d *driver.Delivery, s *Settlement[E], err error) {
	s.Outcome = Requeued
	s.SettleErr = err
	if s.Where != "" {
		s.Where = WhereRequeued
	}
	if nerr := d.Reject(true); nerr != nil {
		s.SettleErr = errors.Join(err, nerr)
	}
}

// publishCopy republishes the original delivery's bytes, its envelope
// changed as c says, to queue through the default exchange: persistent,
// mandatory, confirmed, within the detached settlement deadline, under
// the delivery's process span.
func (k *Loop[E]) publishCopy(d *driver.Delivery, s *Settlement[E], c Change, reason, queue string) error {
	ctx, cancel := context.WithTimeout(context.Background(), tuning.SettlementDeadline)
	defer cancel()
	if s.span.IsValid() && k.conn.Tracing() {
		ctx = trace.ContextWithSpanContext(ctx, s.span)
	}
	headers, id, ident := k.h.Copy(s.Env, d.RoutingKey, c, reason)
	return k.conn.PublishAs(ctx, Copy(d, queue, headers, id), ident)
}
