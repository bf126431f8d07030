package stream

import (
	"context"
	"errors"
	"fmt"
	"math"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/topology"
)

// Reader reads one stream with one handler, in offset order. Start one
// with Read; stop it with Close.
type Reader struct {
	conn   *acemq.Conn
	stream string
	cfg    config
	start  Offset // where the first subscription starts
	c      *acemq.Consumer

	hctx    context.Context // checkpoint saves while reading; cancelled by Close
	hcancel context.CancelFunc
	ended   chan struct{} // closed when the subscription ended without Close
	endOnce sync.Once
	done    chan struct{}

	mu         sync.Mutex
	subscribed bool      // the first subscription was asked for
	startedAt  time.Time // when
	next       int64     // the offset after the last settled one
	known      bool      // next is known (something was settled, or a checkpoint loaded)
	saved      int64     // next at the last checkpoint save
	pending    int       // settled since the last save

	closeOnce sync.Once
	closeErr  error
}

// Read starts a reader of stream: every message, from the start WithOffset
// (or its checkpoint) names, is decoded into a T and handed to h as an
// acemq.Message whose Offset is its stream offset, one at a time, in
// offset order. h's decision is settled as a stream allows (docs/wire.md
// §5.9): Accept advances the position; Reject copies the message to
// {stream}.dlq and Park to {stream}.parked (then the position advances);
// Retry and InProgress are refused, since a stream cannot redeliver: the
// message is parked with a reason saying so. The original always stays in
// the stream. Before subscribing, Read declares {stream}.dlq and
// {stream}.parked, never the stream itself (declare it with a Topology and
// topology.WithQueueType(topology.QueueStream)).
//
// The reader runs on acemq's consume engine, with the connection's consume
// interceptors and the reader's WithConsumeInterceptors, WithMiddleware and
// WithBreaker. After a lost connection the reader resumes by itself from
// the offset after the last one it settled: nothing is skipped and nothing
// settled is read again. ctx bounds the start only.
func Read[T any](ctx context.Context, conn *acemq.Conn, stream string, h acemq.Handler[T], opts ...Option) (*Reader, error) {
	switch {
	case conn == nil:
		return nil, errors.New("stream: Read needs a connection")
	case h == nil:
		return nil, errNoHandler
	case stream == "":
		return nil, errors.New("stream: Read needs a stream name")
	}
	cfg := config{prefetch: DefaultPrefetch, codec: acemq.JSON, every: DefaultCheckpointEvery}
	for _, o := range opts {
		if o != nil {
			o.apply(&cfg)
		}
	}
	if err := errors.Join(cfg.errs...); err != nil {
		return nil, err
	}
	if cfg.tag == "" {
		cfg.tag = "acemq-" + stream
	}
	r := &Reader{conn: conn, stream: stream, cfg: cfg, start: cfg.offset, ended: make(chan struct{}), done: make(chan struct{})}
	if err := r.prepare(ctx); err != nil {
		return nil, err
	}
	// The reader is a consumer of the stream, settled by the consume
	// engine as a stream allows (engine.Stream), with the connection's
	// consume interceptors and the reader's middleware and breaker. Its
	// drain is bounded by Close's ctx alone.
	copts := append([]acemq.ConsumeOption{
		acemq.WithCodec(cfg.codec), acemq.WithPrefetch(cfg.prefetch), acemq.WithConsumerTag(cfg.tag),
		acemq.WithDeclarations(false), acemq.WithDrainTimeout(math.MaxInt64),
	}, cfg.consume...)
	r.hctx, r.hcancel = context.WithCancel(context.WithoutCancel(ctx))
	sctx := engine.WithStream(ctx, &engine.Stream{Args: r.args, Seen: r.seen, Settled: r.settled, Ended: r.end})
	c, err := acemq.Consume(sctx, conn, stream, h, copts...)
	if err != nil {
		r.hcancel()
		return nil, fmt.Errorf("stream: subscribing to the stream %q: %w", stream, err)
	}
	r.c = c
	go func() {
		select {
		case <-c.Done():
		case <-r.ended:
		}
		close(r.done)
	}()
	return r, nil
}

// prepare loads the checkpoint and declares {stream}.dlq and
// {stream}.parked.
func (r *Reader) prepare(ctx context.Context) error {
	if r.cfg.store != nil {
		last, ok, err := r.cfg.store.Load(ctx, r.cfg.name)
		if err != nil {
			return fmt.Errorf("stream: loading the checkpoint %q of the reader of %q: %w", r.cfg.name, r.stream, err)
		}
		if ok {
			r.start = At(last + 1)
			r.next, r.known, r.saved = last+1, true, last+1
		}
	}
	if !r.cfg.noDeclare {
		topo := topology.New().
			Queue(contract.DeadLetterQueue(r.stream), topology.WithQueueType(topology.QueueClassic)).
			Queue(contract.ParkedQueue(r.stream), topology.WithQueueType(topology.QueueClassic))
		if err := topo.Apply(ctx, r.conn); err != nil {
			return fmt.Errorf("stream: the reader of %q could not declare its dead-letter queues: %w", r.stream, err)
		}
	}
	return nil
}

// args is the x-stream-offset of a subscription: the start for the
// first; after that (a pause, or a lost connection) the offset after the
// last settled one, or with nothing settled yet the original start, except
// that Next and Last become the moment the reader first subscribed, so
// that nothing published meanwhile is skipped.
func (r *Reader) args() driver.Table {
	r.mu.Lock()
	defer r.mu.Unlock()
	if !r.subscribed {
		r.subscribed, r.startedAt = true, time.Now()
		return driver.Table{driver.StreamOffsetHeader: r.start.arg()}
	}
	o := r.cfg.offset
	switch {
	case r.known:
		o = At(r.next)
	case o.kind == kindNext || o.kind == kindLast:
		o = Since(r.startedAt)
	}
	return driver.Table{driver.StreamOffsetHeader: o.arg()}
}

// seen reports whether the delivery at off was settled before (a
// redelivery after a resumption that began at an earlier chunk).
func (r *Reader) seen(off int64) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.known && off < r.next
}

// settled advances the position past off.
func (r *Reader) settled(off int64) { r.advance(off + 1) }

// end records that the reader stopped reading.
func (r *Reader) end() { r.endOnce.Do(func() { close(r.ended) }) }

// advance records that everything before next is settled, and saves a
// checkpoint when it is due.
func (r *Reader) advance(next int64) {
	r.mu.Lock()
	r.next, r.known = next, true
	r.pending++
	due := r.cfg.store != nil && r.pending >= r.cfg.every
	r.mu.Unlock()
	if due {
		r.checkpoint(r.hctx)
	}
}

// checkpoint saves the position if it moved since the last save.
func (r *Reader) checkpoint(ctx context.Context) error {
	r.mu.Lock()
	next, known, saved := r.next, r.known, r.saved
	r.mu.Unlock()
	if r.cfg.store == nil || !known || next == saved {
		return nil
	}
	if err := r.cfg.store.Save(ctx, r.cfg.name, next-1); err != nil {
		err = fmt.Errorf("stream: saving the checkpoint %q of the reader of %q at offset %d: %w", r.cfg.name, r.stream, next-1, err)
		if r.cfg.onCheckFail != nil {
			r.cfg.onCheckFail(err)
		}
		return err
	}
	r.mu.Lock()
	r.saved, r.pending = next, 0
	r.mu.Unlock()
	return nil
}

// Stream is the stream the reader reads.
func (r *Reader) Stream() string { return r.stream }

// Tag is the consumer tag.
func (r *Reader) Tag() string { return r.cfg.tag }

// Position returns the offset after the last message the reader settled,
// where it would resume, and false when it has settled nothing and
// started from no checkpoint.
func (r *Reader) Position() (next int64, ok bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.next, r.known
}

// Done is closed when the reader has stopped reading: after Close, or when
// the broker ended the subscription (the stream was deleted).
func (r *Reader) Done() <-chan struct{} { return r.done }

// Close stops the reader: no new message is started, the one being handled
// finishes and is settled (within ctx; past it, the handler's context is
// cancelled and its message is left unsettled, to be read again), and with
// checkpoints the position is saved. Messages the broker had sent ahead are
// not handled; the next reader from the checkpoint reads them. Close is
// idempotent.
func (r *Reader) Close(ctx context.Context) error {
	r.closeOnce.Do(func() {
		err := r.c.Close(ctx)
		var de *acemq.DrainError
		switch {
		case errors.As(err, &de) && ctx.Err() != nil:
			r.closeErr = fmt.Errorf("stream: the reader of %q did not finish its handler before the deadline: %w", r.stream, ctx.Err())
		case err != nil:
			r.closeErr = fmt.Errorf("stream: closing the reader of %q: %w", r.stream, err)
		}
		r.end()
		<-r.done
		r.hcancel()
		if err := r.checkpoint(context.WithoutCancel(ctx)); err != nil {
			r.closeErr = errors.Join(r.closeErr, err)
		}
	})
	return r.closeErr
}
