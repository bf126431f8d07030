package engine

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"

	"github.com/acemq/acemq/driver"
)

// Flow control (docs/pipeline.md#flow-control): a consumer is paused by
// cancelling its subscription (basic.cancel on RabbitMQ) and resumed with
// a new one; its circuit breaker (breaker.go) pauses and resumes it the
// same way.

// generation is one subscription of a consumer: the one Consume made, and
// one more each time the consumer resumes.
type generation struct {
	sub     driver.Subscription
	readers sync.WaitGroup // workers reading it
	pending atomic.Int64   // deliveries taken up from it and not yet settled
	// draining: paused or closing; what is still handed up goes back.
	draining atomic.Bool
	retired  atomic.Bool // no worker reads it any more
	once     sync.Once
	drained  chan struct{} // closed once retired
	flow     *flowState    // its consumer's, which forgets it once closed
}

// settled records that one of its deliveries was settled; a retired
// generation closes its subscription when the last one is.
func (g *generation) settled() {
	if g.pending.Add(-1) == 0 && g.retired.Load() {
		g.close()
	}
}

// retire marks that no worker reads it any more, and closes its
// subscription once nothing taken from it is unsettled.
func (g *generation) retire() {
	g.retired.Store(true)
	if g.pending.Load() == 0 {
		g.close()
	}
	close(g.drained)
}

// close closes its subscription, once, in the background (closeSub).
func (g *generation) close() {
	g.once.Do(func() {
		f := g.flow
		f.mu.Lock()
		delete(f.gens, g)
		f.mu.Unlock()
		f.closeSub(g.sub)
	})
}

// Why a consumer is paused; it takes deliveries only when no reason holds.
const (
	pausedByUser uint8 = 1 << iota
	pausedByBreaker
)

// ErrPaused is acemq.ErrPaused: wrapped by Pause or Resume of a consumer
// that is closing (and by a paused publisher's sends, in package acemq).
var ErrPaused = errors.New("paused")

// flowState is a consumer's subscriptions and pause state.
type flowState struct {
	// trans serialises pause and resume transitions (which talk to the
	// broker); mu guards the fields the workers read.
	trans   sync.Mutex
	reasons uint8 // under trans

	mu      sync.Mutex
	cur     *generation              // nil while paused
	resumed chan struct{}            // non-nil while paused; closed on resume
	gens    map[*generation]struct{} // not yet closed
	last    *generation              // the latest retired, for a second Pause

	conn   *Conn
	closes closings // subscription closes in progress (closeSub)
}

// begin installs the first subscription.
func (k *Loop[E]) begin(sub driver.Subscription) {
	k.flow.gens = map[*generation]struct{}{}
	k.flow.cur = k.newGeneration(sub)
}

// newGeneration records sub as a generation. Called with flow.mu held, or
// before the workers start.
func (k *Loop[E]) newGeneration(sub driver.Subscription) *generation {
	g := &generation{sub: sub, drained: make(chan struct{}), flow: &k.flow}
	k.flow.gens[g] = struct{}{}
	return g
}

// take returns the generation a worker reads next, waiting while the
// consumer is paused; nil once it is stopping.
func (k *Loop[E]) take() *generation {
	for {
		k.flow.mu.Lock()
		if k.isStopping() {
			k.flow.mu.Unlock()
			return nil
		}
		if g := k.flow.cur; g != nil {
			g.readers.Add(1)
			k.flow.mu.Unlock()
			return g
		}
		resumed := k.flow.resumed
		k.flow.mu.Unlock()
		select {
		case <-resumed:
		case <-k.stopping:
			return nil
		}
	}
}

// hold adds a reason to be paused. When it is the first, the subscription
// is cancelled and its workers put back what it still hands up; the
// returned channel is closed once its running handlers have returned.
func (k *Loop[E]) hold(ctx context.Context, reason uint8) (<-chan struct{}, error) {
	f := &k.flow
	f.trans.Lock()
	defer f.trans.Unlock()
	f.mu.Lock()
	if k.isStopping() {
		f.mu.Unlock()
		return nil, fmt.Errorf("the consumer of %q is closing: %w", k.queue, ErrPaused)
	}
	was := f.reasons
	f.reasons |= reason
	if was != 0 {
		var drained <-chan struct{}
		if f.last != nil {
			drained = f.last.drained
		}
		f.mu.Unlock()
		return drained, nil
	}
	g := f.cur
	f.cur = nil
	f.resumed = make(chan struct{})
	f.last = g
	g.draining.Store(true)
	// Accounted like a wait in the consumer, so Close waits for it; added
	// under mu, before Close can mark the consumer stopping.
	k.waits.Add(1)
	f.mu.Unlock()
	if err := g.sub.Cancel(ctx); err != nil {
		// It cannot be cancelled (its channel is gone, or ctx ended):
		// close it, which puts everything unsettled back.
		g.close()
	}
	if k.h.Flush != nil {
		k.h.Flush() // a batch being gathered is handed over now (ConsumeBatch)
	}
	go func() {
		defer k.waits.Done()
		g.readers.Wait()
		g.retire()
	}()
	k.conn.log.Info("acemq: the consumer is paused", slog.String("queue", k.queue), slog.String("by", reasonName(reason)))
	return g.drained, nil
}

// release removes a reason to be paused. When it was the last, the
// consumer subscribes again; if that fails the reason stays.
func (k *Loop[E]) release(ctx context.Context, reason uint8) error {
	f := &k.flow
	f.trans.Lock()
	defer f.trans.Unlock()
	if f.reasons&reason == 0 {
		return nil
	}
	if f.reasons != reason {
		f.reasons &^= reason // still paused for another reason
		return nil
	}
	if k.isStopping() {
		return fmt.Errorf("the consumer of %q is closing: %w", k.queue, ErrPaused)
	}
	if k.ended.Load() {
		return fmt.Errorf("the consumer of %q cannot resume: its subscription ended without Close (its queue was deleted, or the broker cancelled it); close it and start a new one", k.queue)
	}
	sub, err := k.conn.t.Consume(ctx, k.spec())
	if err != nil {
		return fmt.Errorf("resuming the consumer of %q: %w", k.queue, err)
	}
	f.mu.Lock()
	if k.isStopping() {
		f.mu.Unlock()
		f.closeSub(sub)
		return fmt.Errorf("the consumer of %q is closing: %w", k.queue, ErrPaused)
	}
	f.reasons = 0
	f.cur = k.newGeneration(sub)
	close(f.resumed)
	f.resumed = nil
	f.mu.Unlock()
	k.conn.log.Info("acemq: the consumer resumed", slog.String("queue", k.queue), slog.String("by", reasonName(reason)))
	return nil
}

func reasonName(r uint8) string {
	if r == pausedByBreaker {
		return "circuit breaker"
	}
	return "application"
}

// Paused reports whether the consumer is paused, for any reason.
func (k *Loop[E]) Paused() bool {
	k.flow.mu.Lock()
	defer k.flow.mu.Unlock()
	return k.flow.cur == nil && !k.isStopping()
}

// spec is the consumer's subscription.
func (k *Loop[E]) spec() driver.ConsumeSpec {
	if k.stream != nil {
		return driver.ConsumeSpec{Queue: k.queue, Tag: k.cfg.Tag, Prefetch: k.cfg.Prefetch, Args: k.stream.Args(), Resume: k.stream.Args, UnconvertedHeaders: true}
	}
	return driver.ConsumeSpec{Queue: k.queue, Tag: k.cfg.Tag, Prefetch: k.cfg.Prefetch, Args: k.cfg.Args, UnconvertedHeaders: true}
}

// stopFlow marks the consumer stopping and cancels its current
// subscription, if any (Close).
func (k *Loop[E]) stopFlow(ctx context.Context) {
	f := &k.flow
	f.mu.Lock()
	close(k.stopping)
	g := f.cur
	if g != nil {
		g.draining.Store(true)
	}
	f.mu.Unlock()
	if g != nil {
		if err := g.sub.Cancel(ctx); err != nil {
			// The subscription cannot be cancelled (its channel is gone,
			// or ctx has ended): close it, which ends the deliveries at
			// once.
			g.close()
		}
	}
}

// closeAll starts closing every subscription not yet closed: whatever is
// still unsettled goes back to the queue.
func (k *Loop[E]) closeAll() {
	k.flow.mu.Lock()
	gens := make([]*generation, 0, len(k.flow.gens))
	for g := range k.flow.gens {
		gens = append(gens, g)
	}
	k.flow.mu.Unlock()
	for _, g := range gens {
		g.close()
	}
}

// Pause stops the consumer taking deliveries without closing it
// (acemq.Consumer.Pause): it returns once the running handlers have
// returned, or ctx's error if ctx ends first.
func (k *Loop[E]) Pause(ctx context.Context) error {
	drained, err := k.hold(ctx, pausedByUser)
	if err != nil || drained == nil {
		return err
	}
	select {
	case <-drained:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("the consumer of %q is paused, but handlers were still running when the context ended: %w", k.queue, ctx.Err())
	}
}

// Resume subscribes a paused consumer again, within ctx
// (acemq.Consumer.Resume).
func (k *Loop[E]) Resume(ctx context.Context) error {
	return k.release(ctx, pausedByUser)
}
