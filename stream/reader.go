package stream

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"strconv"
	"sync"
	"time"
	"unicode/utf8"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/plumbing"
	"github.com/acemq/acemq/internal/tuning"
	"github.com/acemq/acemq/internal/wire"
)

// The reasons a reader writes in x-acemq-error on the copies it sets aside
// (docs/wire.md §6.2); the stream refusal has no shared wording.
const (
	reasonRefused     = "a stream cannot retry or put back a message, so it was parked: "
	reasonRejected    = "the handler rejected it: "
	reasonFatal       = "the handler reported an unprocessable message: "
	reasonParked      = "the handler parked it: "
	reasonUndecodable = "could not be decoded: "
)

// Reader reads one stream with one handler, in offset order. Start one
// with Read; stop it with Close.
type Reader struct {
	conn   *acemq.Conn
	plumb  *plumbing.Conn
	stream string
	cfg    config
	handle func(ctx context.Context, d *driver.Delivery, env acemq.Envelope) (acemq.Ack, error)

	sub       driver.Subscription
	startedAt time.Time
	hctx      context.Context
	hcancel   context.CancelFunc
	stopping  chan struct{}
	done      chan struct{}

	mu      sync.Mutex
	next    int64 // the offset after the last settled one
	known   bool  // next is known (something was settled, or a checkpoint loaded)
	saved   int64 // next at the last checkpoint save
	pending int   // settled since the last save

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
// acemq.WithQueueType(acemq.QueueStream)).
//
// After a lost connection the reader resumes by itself from the offset
// after the last one it settled: nothing is skipped and nothing settled is
// read again. ctx bounds the start only.
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
	codec := cfg.codec
	r := &Reader{conn: conn, plumb: plumbing.ConnOf(conn), stream: stream, cfg: cfg}
	r.handle = func(ctx context.Context, d *driver.Delivery, env acemq.Envelope) (acemq.Ack, error) {
		var v T
		if err := decode(codec, d, &v); err != nil {
			return acemq.Ack{}, err
		}
		return h(ctx, message(v, d, env, stream)), nil
	}
	if err := r.start(ctx); err != nil {
		return nil, err
	}
	return r, nil
}

// message is the acemq.Message of a delivery from stream.
func message[T any](v T, d *driver.Delivery, env acemq.Envelope, stream string) acemq.Message[T] {
	off, ok := d.StreamOffset()
	return acemq.Message[T]{
		Payload: v, Envelope: env, Queue: stream, Exchange: d.Exchange, RoutingKey: d.RoutingKey,
		ContentType: d.ContentType, ReplyTo: d.ReplyTo, CorrelationID: d.CorrelationID,
		Redelivered: d.Redelivered, Body: d.Body, Offset: off, FromStream: ok,
	}
}

// decode is the consume engine's decoding: the codec must accept the
// content type, and every failure is an *acemq.DecodeError.
func decode(c acemq.Codec, d *driver.Delivery, v any) error {
	if !c.Accepts(d.ContentType) {
		return &acemq.DecodeError{ContentType: d.ContentType, Err: fmt.Errorf("the %s codec does not read content type %q", c.ContentType(), d.ContentType)}
	}
	err := c.Decode(d.Body, d.ContentType, v)
	var de *acemq.DecodeError
	if err == nil || errors.As(err, &de) {
		return err
	}
	return &acemq.DecodeError{ContentType: d.ContentType, Err: err}
}

func (r *Reader) start(ctx context.Context) error {
	start := r.cfg.offset
	if r.cfg.store != nil {
		last, ok, err := r.cfg.store.Load(ctx, r.cfg.name)
		if err != nil {
			return fmt.Errorf("stream: loading the checkpoint %q of the reader of %q: %w", r.cfg.name, r.stream, err)
		}
		if ok {
			start = At(last + 1)
			r.next, r.known, r.saved = last+1, true, last+1
		}
	}
	if !r.cfg.noDeclare {
		topo := acemq.NewTopology().
			Queue(contract.DeadLetterQueue(r.stream), acemq.WithQueueType(acemq.QueueClassic)).
			Queue(contract.ParkedQueue(r.stream), acemq.WithQueueType(acemq.QueueClassic))
		if err := topo.Apply(ctx, r.conn); err != nil {
			return fmt.Errorf("stream: the reader of %q could not declare its dead-letter queues: %w", r.stream, err)
		}
	}
	r.startedAt = time.Now()
	spec := driver.ConsumeSpec{
		Queue:    r.stream,
		Tag:      r.cfg.tag,
		Prefetch: r.cfg.prefetch,
		Args:     driver.Table{driver.StreamOffsetHeader: start.arg()},
		Resume:   r.resumeArgs,
	}
	err := r.conn.Raw(func(dc driver.Conn) error {
		sub, err := dc.Consume(ctx, spec)
		r.sub = sub
		return err
	})
	if err != nil {
		return fmt.Errorf("stream: subscribing to the stream %q: %w", r.stream, err)
	}
	r.stopping = make(chan struct{})
	r.done = make(chan struct{})
	r.hctx, r.hcancel = context.WithCancel(context.WithoutCancel(ctx))
	go r.run()
	return nil
}

// resumeArgs is the x-stream-offset a resubscription after a lost
// connection starts at: the offset after the last settled one; with
// nothing settled yet, the original start, except that Next and Last
// become the moment the reader first subscribed, so that nothing published
// while the connection was down is skipped.
func (r *Reader) resumeArgs() driver.Table {
	r.mu.Lock()
	defer r.mu.Unlock()
	o := r.cfg.offset
	switch {
	case r.known:
		o = At(r.next)
	case o.kind == kindNext || o.kind == kindLast:
		o = Since(r.startedAt)
	}
	return driver.Table{driver.StreamOffsetHeader: o.arg()}
}

func (r *Reader) stopped() bool {
	select {
	case <-r.stopping:
		return true
	default:
		return false
	}
}

func (r *Reader) run() {
	defer close(r.done)
	receive := driver.Receive(r.sub)
	for {
		d, ok := receive()
		if !ok || r.stopped() {
			// Deliveries not started are left alone: a stream cannot take
			// them back (basic.nack is refused), and the broker forgets
			// them when the subscription closes.
			return
		}
		r.process(&d)
	}
}

// process handles and settles one delivery, unless it was settled before
// (a redelivery after a resumption that began at an earlier chunk).
func (r *Reader) process(d *driver.Delivery) {
	off, isStream := d.StreamOffset()
	r.mu.Lock()
	seen := isStream && r.known && off < r.next
	r.mu.Unlock()
	if seen {
		_ = d.Ack()
		return
	}
	env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
	start := time.Now()
	ack, decodeErr, panicked := r.run1(d, env)
	s := acemq.Settlement{Queue: r.stream, Envelope: env, Duration: time.Since(start), Redelivered: d.Redelivered}
	var target, reason string
	var outcome acemq.Outcome
	switch {
	case panicked != nil:
		s.Decision, s.Err = acemq.DecisionReject, panicked
		target, reason, outcome = contract.DeadLetterQueue(r.stream), reasonFatal, acemq.OutcomeRejected
	case decodeErr != nil:
		s.Decision, s.Err = acemq.DecisionPark, decodeErr
		target, reason, outcome = contract.ParkedQueue(r.stream), reasonUndecodable, acemq.OutcomeParked
	default:
		s.Decision, s.Err = ack.Decision(), ack.Err()
		switch ack.Decision() {
		case acemq.DecisionAccept:
		case acemq.DecisionReject:
			target, reason, outcome = contract.DeadLetterQueue(r.stream), reasonRejected, acemq.OutcomeRejected
			if acemq.IsFatal(ack.Err()) {
				reason = reasonFatal
			}
		case acemq.DecisionPark:
			target, reason, outcome = contract.ParkedQueue(r.stream), reasonParked, acemq.OutcomeParked
		default: // Retry, InProgress: a stream cannot redeliver
			if s.Err == nil {
				s.Err = errors.New(ack.Decision().String() + " requested")
			}
			target, reason, outcome = contract.ParkedQueue(r.stream), reasonRefused, acemq.OutcomeParked
		}
	}
	if target == "" {
		s.Outcome = acemq.OutcomeAcked
	} else {
		s.Reason = reason + wire.Describe(s.Err)
		if decodeErr != nil {
			s.Reason = plumbing.UndecodableReason(decodeErr)
		}
		s.Target = target
		s.Outcome = outcome
		if err := r.setAside(d, env, target, s.Reason); err != nil {
			// The reader is closing and the copy could not be made: the
			// message is not settled, and the position stays before it.
			s.Outcome = acemq.OutcomeRequeued
			s.SettleErr = err
			r.report(s)
			return
		}
	}
	// Acknowledging a stream delivery only frees its prefetch slot; on a
	// channel that is gone it fails, which changes nothing.
	_ = d.Ack()
	if isStream {
		r.advance(off + 1)
	}
	r.report(s)
}

func (r *Reader) report(s acemq.Settlement) {
	if r.plumb != nil && r.plumb.Settled != nil {
		r.plumb.Settled(s)
	}
}

// run1 runs the handler, turning a panic into an error.
func (r *Reader) run1(d *driver.Delivery, env acemq.Envelope) (ack acemq.Ack, decodeErr, panicked error) {
	defer func() {
		if v := recover(); v != nil {
			panicked = &acemq.PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	ack, decodeErr = r.handle(r.hctx, d, env)
	return ack, decodeErr, nil
}

// setAside copies the delivery to target with reason, as every set-aside
// is made (docs/wire.md §6.3). A copy that fails is tried again, waiting
// longer each time, until it is made or the reader closes: on a stream the
// original cannot be put back, and moving on would lose it from the
// dead-letter queue.
func (r *Reader) setAside(d *driver.Delivery, env acemq.Envelope, target, reason string) error {
	h := env.AppendHeaders(nil, d.RoutingKey)
	h[wire.HeaderError] = cut(reason)
	id := d.MessageID
	if id == "" {
		id = env.ID()
	}
	m := plumbing.Message{
		RoutingKey: target, Mandatory: true, AlwaysConfirm: true, ContentType: d.ContentType,
		MessageID: id, CorrelationID: d.CorrelationID, ReplyTo: d.ReplyTo, Headers: h, Body: d.Body,
	}
	wait := 100 * time.Millisecond
	for {
		ctx, cancel := context.WithTimeout(context.Background(), tuning.SettlementDeadline)
		err := r.plumb.Publish(ctx, m)
		cancel()
		if err == nil {
			return nil
		}
		t := time.NewTimer(wait)
		select {
		case <-t.C:
		case <-r.stopping:
			t.Stop()
			return fmt.Errorf("stream: the reader of %q closed before it could copy offset %s to %s: %w", r.stream, d.Headers[driver.StreamOffsetHeader], target, err)
		}
		wait = min(2*wait, 5*time.Second)
	}
}

// cut bounds a reason to contract.MaxErrorHeaderBytes on a UTF-8 boundary.
func cut(reason string) string {
	if len(reason) <= contract.MaxErrorHeaderBytes {
		return reason
	}
	mark := "… (cut; the reason was " + strconv.Itoa(len(reason)) + " bytes)"
	n := contract.MaxErrorHeaderBytes - len(mark)
	for n > 0 && !utf8.RuneStart(reason[n]) {
		n--
	}
	return reason[:n] + mark
}

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
		close(r.stopping)
		if err := r.sub.Cancel(ctx); err != nil {
			_ = r.sub.Close()
		}
		select {
		case <-r.done:
		case <-ctx.Done():
			r.hcancel()
			r.closeErr = fmt.Errorf("stream: the reader of %q did not finish its handler before the deadline: %w", r.stream, ctx.Err())
		}
		_ = r.sub.Close()
		if r.closeErr == nil {
			<-r.done
		}
		r.hcancel()
		if err := r.checkpoint(context.WithoutCancel(ctx)); err != nil {
			r.closeErr = errors.Join(r.closeErr, err)
		}
	})
	return r.closeErr
}
