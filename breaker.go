package acemq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/tuning"
	"github.com/acemq/acemq/internal/wire"
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

type breaker struct {
	k   *consumerCore
	cfg Breaker

	state atomic.Pointer[BreakerState] // read without mu by admit's fast path
	mu    sync.Mutex
	// consecutive failures, and the ring of recent results (true = failure).
	consecutive int
	ring        []bool
	ringAt      int
	ringLen     int
	ringFails   int
	probing     bool
	tripped     bool          // set by holdBack, taken by putBack
	decided     chan struct{} // closed when a probe's result is known
	opened      int           // how many times it has opened
}

var (
	stateClosed   = BreakerClosed
	stateOpen     = BreakerOpen
	stateHalfOpen = BreakerHalfOpen
)

func newBreaker(k *consumerCore, cfg *Breaker) *breaker {
	if cfg == nil {
		return nil
	}
	b := &breaker{k: k, cfg: *cfg, decided: make(chan struct{})}
	if cfg.FailureRate > 0 {
		b.ring = make([]bool, cfg.Window)
	}
	b.state.Store(&stateClosed)
	return b
}

// State is the breaker's state.
func (b *breaker) State() BreakerState {
	if b == nil {
		return BreakerClosed
	}
	return *b.state.Load()
}

// admit says whether a delivery just handed up may run: always while the
// breaker is closed (or absent), never while it is open; while half open,
// the first runs as the probe and the others wait for its result.
func (b *breaker) admit() bool {
	if b == nil || b.state.Load() == &stateClosed {
		return true
	}
	for {
		b.mu.Lock()
		switch b.state.Load() {
		case &stateClosed:
			b.mu.Unlock()
			return true
		case &stateOpen:
			b.mu.Unlock()
			return false
		}
		if !b.probing {
			b.probing = true
			b.mu.Unlock()
			return true
		}
		decided := b.decided
		b.mu.Unlock()
		select {
		case <-decided:
		case <-b.k.stopping:
			return false
		}
	}
}

// result classifies a handler's result: +1 a failure, -1 a success, 0 not
// counted.
func (b *breaker) result(ack Ack, decodeErr, refused, panicked error) int {
	var err error
	switch {
	case panicked != nil, refused != nil:
		return 0
	case decodeErr != nil:
		var de *DecodeError
		if !errors.As(decodeErr, &de) || !de.Retryable {
			return 0
		}
		err = decodeErr
	case ack.decision == DecisionAccept:
		return -1
	case ack.decision == DecisionRetry:
		err = ack.err
	default:
		return 0
	}
	if b.cfg.IsFailure != nil && !b.cfg.IsFailure(err) {
		return 0
	}
	return 1
}

// holdBack records a handler's result and says whether the delivery is to
// be put back unchanged: a failure that opened the breaker, or one while it
// is open.
func (b *breaker) holdBack(ack Ack, decodeErr, refused, panicked error) bool {
	if b == nil {
		return false
	}
	r := b.result(ack, decodeErr, refused, panicked)
	b.mu.Lock()
	defer b.mu.Unlock()
	switch b.state.Load() {
	case &stateOpen:
		return r > 0
	case &stateHalfOpen:
		// The probe's result.
		b.probing = false
		switch {
		case r > 0:
			b.open()
			return true
		case r < 0:
			b.reset()
			b.setState(&stateClosed)
			b.k.conn.log.Info("acemq: the consumer's circuit breaker closed: the probe succeeded", slog.String("queue", b.k.queue))
		}
		b.wake()
		return false
	}
	if r == 0 {
		return false
	}
	failed := r > 0
	if failed {
		b.consecutive++
	} else {
		b.consecutive = 0
	}
	if b.ring != nil {
		if b.ringLen == len(b.ring) {
			if b.ring[b.ringAt] {
				b.ringFails--
			}
		} else {
			b.ringLen++
		}
		b.ring[b.ringAt] = failed
		if failed {
			b.ringFails++
		}
		b.ringAt = (b.ringAt + 1) % len(b.ring)
	}
	if !failed {
		return false
	}
	trip := b.cfg.ConsecutiveFailures > 0 && b.consecutive >= b.cfg.ConsecutiveFailures
	if b.ring != nil && b.ringLen == len(b.ring) && float64(b.ringFails) >= b.cfg.FailureRate*float64(len(b.ring)) {
		trip = true
	}
	if trip {
		b.open()
	}
	return trip
}

// open opens the breaker; putBack then pauses the consumer. Called with mu
// held.
func (b *breaker) open() {
	var why string
	switch {
	case b.state.Load() == &stateHalfOpen:
		why = "the probe failed"
	case b.cfg.ConsecutiveFailures > 0 && b.consecutive >= b.cfg.ConsecutiveFailures:
		why = fmt.Sprintf("%d failures in a row", b.consecutive)
	default:
		why = fmt.Sprintf("%d of the last %d results were failures", b.ringFails, b.ringLen)
	}
	b.reset()
	b.setState(&stateOpen)
	b.tripped = true
	b.opened++
	b.wake()
	b.k.conn.obs.breakerOpen(b.k.queue)
	b.k.conn.log.Warn("acemq: the consumer's circuit breaker opened; the consumer is paused for the cool-down",
		slog.String("queue", b.k.queue), slog.String("why", why), slog.Duration("coolDown", b.cfg.CoolDown))
}

func (b *breaker) reset() {
	b.consecutive = 0
	b.ringAt, b.ringLen, b.ringFails = 0, 0, 0
}

func (b *breaker) setState(s *BreakerState) { b.state.Store(s) }

// wake lets the deliveries waiting for a probe's result look again.
func (b *breaker) wake() {
	close(b.decided)
	b.decided = make(chan struct{})
}

// errBreakerOpen is the Err joined to a settlement put back by the breaker.
var errBreakerOpen = errors.New("the consumer's circuit breaker is open; the message was put back unchanged")

// putBack puts a delivery held back by the breaker back on its queue,
// unchanged, after pausing the consumer when its failure opened the
// breaker (so that the broker does not hand it straight back). Its
// handler ran and failed, so it goes back with a reject, which a quorum
// queue counts toward its delivery limit.
func (b *breaker) putBack(d *driver.Delivery, ack Ack, decodeErr error, s *Settlement) {
	b.mu.Lock()
	tripped := b.tripped
	b.tripped = false
	b.mu.Unlock()
	if tripped {
		b.pause()
	}
	s.Decision = DecisionRetry
	s.Err = ack.err
	if decodeErr != nil {
		s.Err = decodeErr
	}
	s.Reason = "the circuit breaker is open: " + wire.Describe(s.Err)
	s.Outcome = OutcomeRequeued
	if err := d.Reject(true); err != nil {
		s.SettleErr = err
	}
	s.Err = errors.Join(s.Err, errBreakerOpen)
}

// pause pauses the consumer for the cool-down and starts the goroutine
// that probes after it. Called on a worker, so it cannot wait for the
// running handlers (it is one of them): hold does not.
func (b *breaker) pause() {
	k := b.k
	ctx, cancel := context.WithTimeout(context.Background(), tuning.SettlementDeadline)
	_, err := k.hold(ctx, pausedByBreaker)
	cancel()
	if err != nil {
		return // closing
	}
	k.waits.Add(1)
	go b.coolDown()
}

// coolDown waits out the cool-down, then half-opens the breaker and
// subscribes again; when that fails (the connection is down, say) it
// waits another cool-down.
func (b *breaker) coolDown() {
	k := b.k
	defer k.waits.Done()
	for {
		t := time.NewTimer(b.cfg.CoolDown)
		select {
		case <-t.C:
		case <-k.stopping:
			t.Stop()
			return
		}
		b.mu.Lock()
		b.probing = false
		b.setState(&stateHalfOpen)
		b.wake()
		b.mu.Unlock()
		k.conn.log.Info("acemq: the consumer's circuit breaker is half open: one delivery runs as a probe", slog.String("queue", k.queue))
		// k.hctx ends when Close has finished, cutting short a
		// resubscription that waits for a lost connection to recover.
		ctx, cancel := context.WithTimeout(k.hctx, tuning.SettlementDeadline)
		err := k.release(ctx, pausedByBreaker)
		cancel()
		if err == nil || k.isStopping() || k.ended.Load() {
			return
		}
		k.conn.log.Warn("acemq: the consumer's circuit breaker could not resume the consumer; it tries again after another cool-down", slog.String("queue", k.queue), safeErr(err))
	}
}

// Breaker is the state of the consumer's circuit breaker; BreakerClosed
// for a consumer without one.
func (c *Consumer) Breaker() BreakerState { return c.core.brk.State() }
