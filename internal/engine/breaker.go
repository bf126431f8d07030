package engine

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

// failure is what the breaker reads of a verdict.
type failure struct {
	fail      Failure
	retryable bool
	decision  Decision
	err       error
}

// Breaker is a circuit breaker's configuration, acemq.Breaker's (checked
// there).
type Breaker struct {
	ConsecutiveFailures int
	FailureRate         float64
	Window              int
	CoolDown            time.Duration
	IsFailure           func(err error) bool
}

// BreakerState is acemq.BreakerState's values.
type BreakerState string

// The breaker's states.
const (
	BreakerClosed   BreakerState = "closed"
	BreakerOpen     BreakerState = "open"
	BreakerHalfOpen BreakerState = "half_open"
)

// the breaker's view of its consumer: what it pauses, resumes and logs.
type breakerOwner interface {
	hold(ctx context.Context, reason uint8) (<-chan struct{}, error)
	release(ctx context.Context, reason uint8) error
	ownerQueue() string
	ownerConn() *Conn
	stoppingCh() <-chan struct{}
	handlerContext() context.Context
	addWait(delta int)
	isStopping() bool
	safeErr(err error) slog.Attr
	Ended() bool
	breakerOpened()
}

type breaker struct {
	k   breakerOwner
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

func newBreaker(k breakerOwner, cfg *Breaker) *breaker {
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
		case <-b.k.stoppingCh():
			return false
		}
	}
}

// result classifies a verdict: +1 a failure, -1 a success, 0 not counted.
func (b *breaker) result(v failure) int {
	var err error
	switch {
	case v.fail == Panicked, v.fail == Refused:
		return 0
	case v.fail == Undecodable:
		if !v.retryable {
			return 0
		}
		err = v.err
	case v.decision == Accept:
		return -1
	case v.decision == Retry:
		err = v.err
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
func (b *breaker) holdBack(v failure) bool {
	if b == nil {
		return false
	}
	r := b.result(v)
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
			b.k.ownerConn().log.Info("acemq: the consumer's circuit breaker closed: the probe succeeded", slog.String("queue", b.k.ownerQueue()))
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
	b.k.breakerOpened()
	b.k.ownerConn().log.Warn("acemq: the consumer's circuit breaker opened; the consumer is paused for the cool-down",
		slog.String("queue", b.k.ownerQueue()), slog.String("why", why), slog.Duration("coolDown", b.cfg.CoolDown))
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

// pauseIfTripped pauses the consumer when the failure holdBack just held
// back opened the breaker (so that the broker does not hand the delivery
// straight back).
func (b *breaker) pauseIfTripped() {
	b.mu.Lock()
	tripped := b.tripped
	b.tripped = false
	b.mu.Unlock()
	if tripped {
		b.pause()
	}
}

// putBack puts a delivery held back by the breaker back on its queue,
// unchanged, once the breaker paused the consumer if its failure opened
// it. Its handler ran and failed (err), so it goes back with a reject,
// which a quorum queue counts toward its delivery limit.
func (k *Loop[E]) putBack(d *driver.Delivery, s *Settlement[E], err error) {
	k.brk.pauseIfTripped()
	s.Decision = Retry
	s.Err = err
	s.Reason = "the circuit breaker is open: " + wire.Describe(err)
	s.Outcome = Requeued
	if k.stream != nil {
		// A stream cannot take it back: it stays unsettled, and the reader
		// reads it again from its position when the breaker resumes it.
	} else if err := d.Reject(true); err != nil {
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
	k.addWait(1)
	go b.coolDown()
}

// coolDown waits out the cool-down, then half-opens the breaker and
// subscribes again; when that fails (the connection is down, say) it
// waits another cool-down.
func (b *breaker) coolDown() {
	k := b.k
	defer k.addWait(-1)
	for {
		t := time.NewTimer(b.cfg.CoolDown)
		select {
		case <-t.C:
		case <-k.stoppingCh():
			t.Stop()
			return
		}
		b.mu.Lock()
		b.probing = false
		b.setState(&stateHalfOpen)
		b.wake()
		b.mu.Unlock()
		k.ownerConn().log.Info("acemq: the consumer's circuit breaker is half open: one delivery runs as a probe", slog.String("queue", k.ownerQueue()))
		// k.hctx ends when Close has finished, cutting short a
		// resubscription that waits for a lost connection to recover.
		ctx, cancel := context.WithTimeout(k.handlerContext(), tuning.SettlementDeadline)
		err := k.release(ctx, pausedByBreaker)
		cancel()
		if err == nil || k.isStopping() || k.Ended() {
			return
		}
		k.ownerConn().log.Warn("acemq: the consumer's circuit breaker could not resume the consumer; it tries again after another cool-down", slog.String("queue", k.ownerQueue()), k.safeErr(err))
	}
}

// BreakerState is the state of the consumer's circuit breaker;
// BreakerClosed for a consumer without one.
func (k *Loop[E]) BreakerState() BreakerState { return k.brk.State() }

// HasBreaker reports whether the consumer has a circuit breaker.
func (k *Loop[E]) HasBreaker() bool { return k.brk != nil }

// The breaker's view of the Loop (breakerOwner).
func (k *Loop[E]) ownerQueue() string              { return k.queue }
func (k *Loop[E]) ownerConn() *Conn                { return k.conn }
func (k *Loop[E]) stoppingCh() <-chan struct{}     { return k.stopping }
func (k *Loop[E]) handlerContext() context.Context { return k.hctx }
func (k *Loop[E]) addWait(delta int)               { k.waits.Add(delta) }
func (k *Loop[E]) safeErr(err error) slog.Attr     { return k.h.SafeErr(err) }
func (k *Loop[E]) breakerOpened() {
	if k.h.BreakerOpened != nil {
		k.h.BreakerOpened()
	}
}
