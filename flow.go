package acemq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/acemq/acemq/internal/engine"
)

// Flow control (docs/pipeline.md#flow-control): pausing and resuming a
// publisher or a consumer. A consumer is paused by cancelling its
// subscription (basic.cancel on RabbitMQ) and resumed with a new one; its
// circuit breaker pauses and resumes it the same way. A consumer's
// subscriptions and pause state are the consume engine's
// (internal/engine's flow.go).

// ErrPaused is wrapped by a Send or SendAll whose ctx ended while the
// publisher was paused (nothing was sent), and by Pause or Resume of a
// consumer that is closing.
var ErrPaused = engine.ErrPaused

// gate holds a publisher's sends while it is paused.
type gate struct {
	mu sync.Mutex
	// held is non-nil while paused; it is closed by Resume.
	held atomic.Pointer[chan struct{}]
}

// wait returns at once unless the gate is paused; then it waits for Resume
// or ctx.
func (g *gate) wait(ctx context.Context) error {
	held := g.held.Load()
	if held == nil {
		return nil
	}
	select {
	case <-*held:
		return nil
	case <-ctx.Done():
		return fmt.Errorf("acemq: the publisher is paused and was not resumed before the context ended: %w (%w)", ErrPaused, context.Cause(ctx))
	}
}

func (g *gate) pause() {
	g.mu.Lock()
	if g.held.Load() == nil {
		ch := make(chan struct{})
		g.held.Store(&ch)
	}
	g.mu.Unlock()
}

func (g *gate) resume() {
	g.mu.Lock()
	if held := g.held.Swap(nil); held != nil {
		close(*held)
	}
	g.mu.Unlock()
}

// Pause holds the publisher's Send and SendAll calls, and SendSeq before
// each message of its sequence: each waits, within its ctx, until Resume (a
// ctx that ends first fails the call with an error wrapping ErrPaused, and
// nothing more is sent). Sends already past the gate
// finish. Pausing a paused publisher does nothing. Other publishers of the
// connection, and the library's own republishes, are not paused.
func (p *Publisher[T]) Pause() { p.gate.pause() }

// Resume lets the publisher's held and later sends go. Resuming a publisher
// that is not paused does nothing.
func (p *Publisher[T]) Resume() { p.gate.resume() }

// Paused reports whether the publisher is paused.
func (p *Publisher[T]) Paused() bool { return p.gate.held.Load() != nil }

// Pause stops the consumer taking deliveries without closing it: its
// subscription is cancelled (basic.cancel on RabbitMQ), so the broker
// hands it nothing more; deliveries it had already handed over but no
// handler has begun go back to the queue (nack with requeue, attempt
// unchanged; the broker marks them redelivered); running handlers finish
// and are settled as they decide, and retries waiting in the consumer keep
// waiting. Pause returns once the running handlers have returned, or with
// ctx's error if ctx ends first (the consumer is paused all the same).
// Pausing a paused consumer waits for the same handlers.
func (c *Consumer) Pause(ctx context.Context) error {
	if err := c.core.loop.Pause(ctx); err != nil {
		return fmt.Errorf("acemq: %w", err)
	}
	return nil
}

// Resume subscribes a paused consumer again, within ctx; it then takes
// deliveries as before. A consumer whose circuit breaker is open stays
// paused until the breaker lets it go. Resuming a consumer that is not
// paused does nothing.
func (c *Consumer) Resume(ctx context.Context) error {
	if err := c.core.loop.Resume(ctx); err != nil {
		return fmt.Errorf("acemq: %w", err)
	}
	return nil
}

// Paused reports whether the consumer is paused, by Pause or by its
// circuit breaker.
func (c *Consumer) Paused() bool { return c.core.loop.Paused() }
