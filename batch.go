package acemq

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"math"
	"runtime/debug"
	"slices"
	"sync"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
)

// maxBatchHold is the most messages a batch consumer holds at once (its
// size times its concurrency): AMQP's prefetch count is 16 bits, so a
// broker hands a consumer no more.
const maxBatchHold = math.MaxUint16

// ConsumeBatch starts a consumer of queue whose handler h takes messages
// in batches, for work that is cheaper in bulk (one database write for
// many messages): a batch is handed over when size messages have arrived,
// or window after its first one arrived, whichever comes first, and at
// once when the consumer closes or pauses. h returns one Ack per message, in the
// order of ms, and each message is settled on its own as that Ack decides,
// exactly as Consume settles it: one message retried or dead-lettered
// leaves the others of its batch accepted. A handler that panics, or
// returns a slice of another length, dead-letters every message of its
// batch as unprocessable.
//
// Each message is decoded into a T before it joins a batch: a body that
// cannot be decoded is parked (or retried) on its own and never reaches
// h. Interceptors, the circuit breaker, retries, metrics and spans are
// Consume's, per message (each message's process span and duration include
// its wait for the batch).
//
// WithConcurrency(n) runs up to n batches at once (default 1), and the
// prefetch defaults to size × n, so that the broker hands over what the
// batches can hold and no more: a consumer holds at most size × n
// messages (65535 at most), one worker goroutine each; Consumer.InFlight
// counts the messages held, whether waiting for their batch or in it. A
// WithPrefetch below size is refused (a batch could never fill), as is 0
// (no limit).
// WithMiddleware, WithOrderKey and WithUnknownType are refused. h's
// context is the consumer's: not cancelled when Close starts, cancelled
// when a drain runs out; it does not carry the values interceptors set on
// each message's context.
func ConsumeBatch[T any](ctx context.Context, c *Conn, queue string, size int, window time.Duration, h func(ctx context.Context, ms []Message[T]) []Ack, opts ...ConsumeOption) (*Consumer, error) {
	switch {
	case c != nil && h == nil:
		return nil, errors.New("acemq: ConsumeBatch needs a handler")
	case size < 1:
		return nil, fmt.Errorf("acemq: ConsumeBatch: a batch size of %d: a batch holds at least one message", size)
	case window <= 0:
		return nil, fmt.Errorf("acemq: ConsumeBatch: a window of %s: the window must be positive", window)
	}
	// The prefetch defaults to what the batches hold, which depends on
	// the concurrency the options set.
	probe := consumeConfig{concurrency: 1}
	for _, o := range opts {
		o.applyConsume(&probe)
	}
	cfg := consumeDefaults()
	if probe.concurrency >= 1 && probe.concurrency <= maxBatchHold/size {
		cfg.prefetch = size * probe.concurrency
	}
	k, err := newConsumer("ConsumeBatch", c, queue, opts, cfg)
	if err != nil {
		return nil, err
	}
	batches := k.cfg.concurrency
	switch {
	case k.cfg.unknownSet:
		return nil, k.only("ConsumeBatch")
	case len(k.cfg.middleware) > 0:
		return nil, errors.New("acemq: ConsumeBatch takes no WithMiddleware: its handler takes a batch, not a Handler")
	case k.cfg.orderKey != nil:
		return nil, errors.New("acemq: ConsumeBatch takes no WithOrderKey: the messages of a batch are handled together")
	case batches > maxBatchHold/size:
		return nil, fmt.Errorf("acemq: ConsumeBatch: %d batches of %d messages at once hold more than the %d deliveries a broker hands one consumer", batches, size, maxBatchHold)
	case k.cfg.prefetch == 0:
		return nil, fmt.Errorf("acemq: ConsumeBatch: WithPrefetch(0) (no limit) would let the broker push the whole queue into memory; the default is the size times the concurrency, %d", size*batches)
	case k.cfg.prefetch < size:
		return nil, fmt.Errorf("acemq: ConsumeBatch: WithPrefetch(%d) is below the batch size %d, so a batch could never fill; the default is the size times the concurrency, %d", k.cfg.prefetch, size, size*batches)
	}
	k.cfg.concurrency = size * batches // a worker holds each message of a batch
	b := &batcher[T]{k: k, clock: c.Clock(), size: size, window: window, h: h, slots: make(chan struct{}, batches)}
	k.flush = b.flush
	codec := k.cfg.codec
	k.handle = func(ctx context.Context, d driver.Delivery, env Envelope) (Ack, error) {
		var v T
		if err := decode(codec, d.Body, d.ContentType, &v); err != nil {
			return Ack{}, err
		}
		return b.add(newMessage(v, &d, env, queue), d.DeliveryTag), nil
	}
	return k.started(ctx)
}

// batcher gathers the messages its consumer's workers hand it into
// batches. Each worker holds its message's delivery, waiting for its
// batch's Ack; the first message's worker leads the batch: it waits for
// the batch to fill, its window to pass or the consumer to stop, then for
// a slot (one per batch handled at once), and runs the handler.
type batcher[T any] struct {
	k      batchHost
	clock  driver.Clock // the connection's: the window runs on it
	size   int
	window time.Duration
	h      func(ctx context.Context, ms []Message[T]) []Ack
	slots  chan struct{}

	mu   sync.Mutex
	open *batch[T] // the batch taking messages, if any
}

// batchHost is the consumer a batcher gathers for: its state (the
// messages waiting for a window count as waiting), when it stops, and the
// handlers' context.
type batchHost interface {
	State() *engine.Consumer
	Stopping() <-chan struct{}
	Context() context.Context
}

type batch[T any] struct {
	ms   []Message[T]
	tags []uint64 // the delivery tags of ms: the order the broker delivered them in
	// waiting is how many of ms wait for the window on the connection's
	// clock (counted in the consumer's state, for acemqtest's WaitIdle
	// under a test clock): every message but the one that fills the batch,
	// until the batch is handed over. Guarded by the batcher's mu.
	waiting int64
	acks    []Ack
	due     chan struct{} // closed when the batch holds size messages, or the consumer pauses
	done    chan struct{} // closed when acks holds the handler's answer
}

// add puts m, delivered with tag, in the open batch (opening one if there
// is none) and returns the Ack the handler gave it.
func (b *batcher[T]) add(m Message[T], tag uint64) Ack {
	b.mu.Lock()
	bt := b.open
	lead := bt == nil
	if lead {
		bt = &batch[T]{ms: make([]Message[T], 0, b.size), tags: make([]uint64, 0, b.size), due: make(chan struct{}), done: make(chan struct{})}
		b.open = bt
	}
	i := len(bt.ms)
	bt.ms = append(bt.ms, m)
	bt.tags = append(bt.tags, tag)
	if len(bt.ms) == b.size {
		b.open = nil
		close(bt.due)
	} else {
		bt.waiting++
		b.k.State().AddWaiting(1)
	}
	b.mu.Unlock()
	if lead {
		b.lead(bt)
	} else {
		<-bt.done
	}
	return bt.acks[i]
}

// flush hands over the batch being gathered, if any, without waiting for
// its window: the consumer is pausing.
func (b *batcher[T]) flush() {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.open != nil {
		close(b.open.due)
		b.open = nil
	}
}

// lead waits until bt is due, then hands it to the handler.
func (b *batcher[T]) lead(bt *batch[T]) {
	// The window runs on the connection's clock: real time, or a test's
	// clock on memory:// (acemqtest.NewClock).
	window := make(chan struct{})
	t := b.clock.AfterFunc(b.window, func() { close(window) })
	select {
	case <-bt.due:
	case <-window:
	case <-b.k.Stopping(): // Close: hand over what there is at once
	case <-b.k.Context().Done():
	}
	t.Stop()
	b.slots <- struct{}{}
	b.mu.Lock()
	if b.open == bt {
		b.open = nil
	}
	b.k.State().AddWaiting(-bt.waiting)
	bt.waiting = 0
	ms, tags := bt.ms, bt.tags
	b.mu.Unlock()
	bt.acks = b.inOrder(ms, tags)
	<-b.slots
	close(bt.done)
}

// inOrder runs the handler over ms in the order the broker delivered them
// (the workers that took them may have reached the batch in another), and
// returns the Acks in the order of ms.
func (b *batcher[T]) inOrder(ms []Message[T], tags []uint64) []Ack {
	order := make([]int, len(ms))
	for i := range order {
		order[i] = i
	}
	slices.SortFunc(order, func(x, y int) int { return cmp.Compare(tags[x], tags[y]) })
	sorted := make([]Message[T], len(ms))
	for i, j := range order {
		sorted[i] = ms[j]
	}
	got := b.run(sorted)
	acks := make([]Ack, len(ms))
	for i, j := range order {
		acks[j] = got[i]
	}
	return acks
}

// run calls the handler, turning a panic or a wrong number of Acks into a
// fatal reject of every message.
func (b *batcher[T]) run(ms []Message[T]) (acks []Ack) {
	defer func() {
		if r := recover(); r != nil {
			acks = every(len(ms), Reject(Fatal(&PanicError{Value: r, Stack: debug.Stack()})))
		}
	}()
	acks = b.h(b.k.Context(), ms)
	if len(acks) != len(ms) {
		return every(len(ms), Reject(Fatal(fmt.Errorf("acemq: the batch handler returned %d decisions for %d messages", len(acks), len(ms)))))
	}
	return acks
}

// every is n copies of a.
func every(n int, a Ack) []Ack {
	acks := make([]Ack, n)
	for i := range acks {
		acks[i] = a
	}
	return acks
}
