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
	"go.opentelemetry.io/otel/trace"
)

// Decision is what a handler asked for a delivery: acemq.Decision's values.
type Decision int

// The decisions, numbered as acemq's.
const (
	Accept Decision = iota
	Retry
	Reject
	Park
	InProgress
)

// Outcome is what the engine did with a delivery: acemq.Outcome's values.
type Outcome string

// The outcomes (docs/wire.md §10.3, and acemq's OutcomeDuplicate and
// OutcomeRequeued).
const (
	Acked        Outcome = "acked"
	Retried      Outcome = "retried"
	Rejected     Outcome = "rejected"
	DeadLettered Outcome = "dead_lettered"
	Parked       Outcome = "parked"
	PutBack      Outcome = "in_progress"
	Duplicate    Outcome = "duplicate"
	Requeued     Outcome = "requeued"
)

// Where is where a wait was held: acemq.Where's values.
type Where string

// The places a wait is held.
const (
	InConsumer Where = "consumer"
	InBroker   Where = "broker"
	// WhereRequeued: the republish failed and the delivery was put back.
	WhereRequeued Where = "requeued"
)

// Failure says why a delivery did not reach its handler, or did not return
// from it.
type Failure uint8

// The failures a Verdict reports.
const (
	// Handled: the handler returned a decision.
	Handled Failure = iota
	// Panicked: an interceptor, the decoder or the handler panicked; Err
	// is the panic.
	Panicked
	// Refused: a consume interceptor refused the delivery; Err is its
	// error and Reason the x-acemq-error.
	Refused
	// Undecodable: the body could not be decoded; Err is the decoder's
	// error, Reason the x-acemq-error of a parked copy, and Retryable says
	// whether the codec said retrying could help.
	Undecodable
)

// Verdict is what the root's dispatch made of one delivery: the
// envelope-side state E (package acemq's envelope and span end) and the
// handler's decision, converted from its Ack.
type Verdict[E any] struct {
	Env E
	// Span is the delivery's process span, the parent of the engine's
	// republishes (invalid without tracing).
	Span trace.SpanContext
	// Duration is the time spent in interceptors, decoding and the handler.
	Duration time.Duration

	Fail      Failure
	Retryable bool   // Undecodable: the codec said retrying could help
	Reason    string // Refused, Undecodable: the x-acemq-error

	Decision  Decision
	Err       error
	Delay     time.Duration
	Chosen    bool // a retry delay the handler chose (RetryAfter)
	Duplicate bool // an Accept of work already done
}

// Settlement is what happened to one delivery, as package acemq's
// Settlement reports it (see there); Env is the dispatch's E.
type Settlement[E any] struct {
	Queue          string
	Env            E
	Decision       Decision
	Outcome        Outcome
	Where          Where
	Target         string
	Delay          time.Duration
	Reason         string
	Err            error
	SettleErr      error
	Duration       time.Duration
	RungMissing    string
	SetAsideFailed string
	Redelivered    bool

	span trace.SpanContext // the process span: the parent of republishes
	gen  *generation       // the subscription it came on (flow.go)
}

// Change is how a republished copy's envelope differs from the delivery's.
type Change uint8

// The copies the engine republishes.
const (
	// Same: an in-progress put-back, unchanged.
	Same Change = iota
	// Next: a retry, the next attempt.
	Next
	// Reasoned: a set-aside copy, carrying the reason (x-acemq-error).
	Reasoned
)

// Hooks are the functions of package acemq a Loop runs with, given when it
// is made. E is the envelope-side state of one delivery (package acemq's
// envelope and process span); the engine never looks inside it.
type Hooks[E any] struct {
	// Dispatch runs one delivery: it reads the envelope, starts the
	// process span, runs the interceptors, decoding and the handler
	// (recovering a panic) and converts the Ack. The delivery goes by
	// value: a pointer passed to a function value would move every
	// delivery to the heap.
	Dispatch func(ctx context.Context, d driver.Delivery) Verdict[E]
	// Emit records a settled delivery (span, metrics, listeners).
	Emit func(Settlement[E])
	// Copy returns the headers of a republished copy of the delivery whose
	// envelope is env, changed as c says (reason is the x-acemq-error of
	// a Reasoned copy), its message id and the identity its span names.
	Copy func(env E, routingKey string, c Change, reason string) (driver.Table, string, Identity)
	// Attempt is env's attempt (1-based) and age, when known.
	Attempt func(env E) (attempt int, age time.Duration, ageKnown bool)
	// OrderKey, when not nil, is WithOrderKey's key of a delivery.
	OrderKey func(d driver.Delivery) string
	// BreakerOpened counts an opening of the circuit breaker.
	BreakerOpened func()
	// Flush hands over a batch being gathered when the consumer pauses
	// (ConsumeBatch); nil otherwise.
	Flush func()
	// SafeErr is an error's text for a log, its secrets redacted.
	SafeErr func(err error) slog.Attr
	// Unregister removes the consumer from its connection once closed.
	Unregister func()
	// DrainError is the error Close returns when the drain ran out with
	// stranded deliveries unsettled after took.
	DrainError func(stranded int, took time.Duration) error
	// ClosingError is the error Close returns when ctx ended (cause is
	// ctx's error) while the subscription was still closing; nil gives the
	// engine's own, unprefixed.
	ClosingError func(cause error) error
}

// Config is a consumer's configuration, converted from acemq's options.
type Config struct {
	Queue        string
	Tag          string
	Concurrency  int
	Prefetch     int
	Args         driver.Table // the subscription's arguments
	DrainTimeout time.Duration
	Retry        Policy
	// Breaker, when not nil, is the consumer's circuit breaker.
	Breaker *Breaker
	// Stream, when not nil, makes the consumer a stream reader.
	Stream *Stream
	// Clock is the connection's clock: in-consumer waits run on it.
	Clock driver.Clock
	// Rungs are the rung queues of the retry policy (for WaitIdle).
	Rungs []string
}

// Loop is the consume engine of one consumer: its workers take deliveries
// from the subscription, hand each to the dispatch, and settle it as the
// verdict decides (settle.go), with flow control (flow.go), the circuit
// breaker (breaker.go) and ordered keys (order.go).
type Loop[E any] struct {
	conn  *Conn
	queue string
	cfg   Config
	h     Hooks[E]

	brk    *breaker
	flow   flowState
	stream *Stream
	keyed  keyOrder

	stopping  chan struct{}
	done      chan struct{}
	hctx      context.Context
	hcancel   context.CancelFunc
	workers   sync.WaitGroup
	waits     sync.WaitGroup // in-consumer waits (timers)
	inflight  atomic.Int64   // handlers running
	state     *Consumer      // the deliveries taken up and not yet settled
	running   atomic.Bool
	abandoned atomic.Bool // the drain ran out: settle nothing more
	ended     atomic.Bool // the subscription ended without Close (Conn.Health)
	closeMu   sync.Mutex
	closeErr  error
	closed    bool
}

// NewLoop returns the consume engine of a consumer of cfg.Queue on c, not
// yet subscribed.
func NewLoop[E any](c *Conn, cfg Config, h Hooks[E]) *Loop[E] {
	k := &Loop[E]{conn: c, queue: cfg.Queue, cfg: cfg, h: h, stream: cfg.Stream,
		state: NewConsumer(cfg.Queue, cfg.Rungs), stopping: make(chan struct{}), done: make(chan struct{})}
	k.brk = newBreaker(k, cfg.Breaker)
	k.flow.conn = c
	return k
}

// State is the consumer's reported state.
func (k *Loop[E]) State() *Consumer { return k.state }

// Stopping is closed when Close begins.
func (k *Loop[E]) Stopping() <-chan struct{} { return k.stopping }

// Context is the handlers' context: not cancelled when Close starts,
// cancelled when a drain runs out.
func (k *Loop[E]) Context() context.Context { return k.hctx }

// Running reports whether the consumer is subscribed and not closing.
func (k *Loop[E]) Running() bool { return k.running.Load() }

// Ended reports whether the subscription ended without Close.
func (k *Loop[E]) Ended() bool { return k.ended.Load() }

// InFlight is the number of handlers running now.
func (k *Loop[E]) InFlight() int { return int(k.inflight.Load()) }

// Done is closed when Close has finished.
func (k *Loop[E]) Done() <-chan struct{} { return k.done }

// Subscribe makes the consumer's first subscription, within ctx; the
// handlers' context derives from ctx, without its end. Run then starts the
// workers, or Abort closes the subscription.
func (k *Loop[E]) Subscribe(ctx context.Context) error {
	sub, err := k.conn.t.Consume(ctx, k.spec())
	if err != nil {
		return err
	}
	k.begin(sub)
	k.hctx, k.hcancel = context.WithCancel(context.WithoutCancel(ctx))
	return nil
}

// Run starts the workers of a subscribed consumer. Package acemq calls it
// under its connection's lock, so that a closing connection either refuses
// the start or finds it fully started.
func (k *Loop[E]) Run() {
	k.running.Store(true)
	for i := 0; i < k.cfg.Concurrency; i++ {
		k.workers.Add(1)
		go k.work()
	}
}

// Abort closes the subscription of a consumer that is not to run, and
// waits for the close.
func (k *Loop[E]) Abort() {
	k.hcancel()
	k.closeAll()
	<-k.flow.closes.wait()
}

func (k *Loop[E]) isStopping() bool {
	select {
	case <-k.stopping:
		return true
	default:
		return false
	}
}

// work takes deliveries straight from the subscription (with no goroutine
// in between when the driver is a driver.Receiver: each hand-over costs a
// wake-up) and processes them; once the consumer is stopping or pausing,
// deliveries not yet started go back to the queue. A paused consumer's
// workers wait for the next subscription (flow.go).
func (k *Loop[E]) work() {
	defer k.workers.Done()
	for {
		g := k.take()
		if g == nil {
			break
		}
		// A driver.Receiver is called directly, not through a function
		// value: the wrapper would copy every delivery once more.
		rcv, direct := g.sub.(driver.Receiver)
		var receive func() (driver.Delivery, bool)
		if !direct || k.h.OrderKey != nil {
			direct, receive = false, k.receiver(g)
		}
		var (
			d  driver.Delivery
			ok bool
		)
		for {
			if direct {
				d, ok = rcv.Receive()
			} else {
				d, ok = receive()
			}
			if !ok {
				break
			}
			// A delivery taken up as the consumer began to stop or
			// pause has not started: put it back rather than run it,
			// with a nack (not processed), which RabbitMQ 4.3 and later
			// do not count toward a quorum queue's delivery limit.
			if g.draining.Load() || k.isStopping() || !k.brk.admit() {
				if k.stream == nil {
					_ = d.Nack(true)
				} // a stream refuses it: the reader reads it again from its position
				continue
			}
			if k.stream != nil {
				if off, ok := d.StreamOffset(); ok && k.stream.Seen(off) {
					_ = d.Ack()
					continue
				}
			}
			g.pending.Add(1)
			if k.h.OrderKey != nil {
				k.processInOrder(&d, g) // order.go
				continue
			}
			k.process(&d, g)
		}
		g.readers.Done()
		if !g.draining.Load() {
			// The subscription ended without Close or Pause. Every
			// worker gets here; it is recorded and logged once.
			if k.ended.CompareAndSwap(false, true) {
				if k.stream != nil {
					k.stream.Ended()
				}
				k.conn.log.Error("acemq: the consumer stopped: its subscription ended without Close (its queue was deleted, or the broker cancelled it)", slog.String("queue", k.queue))
			}
			break
		}
	}
	k.running.Store(false)
}

// Close stops the consumer with a bounded drain (acemq.Consumer.Close).
func (k *Loop[E]) Close(ctx context.Context) error {
	k.closeMu.Lock()
	defer k.closeMu.Unlock()
	if k.closed {
		return k.closeErr
	}
	k.closed = true
	k.running.Store(false)
	start := time.Now()
	dctx, cancel := context.WithTimeout(ctx, k.cfg.DrainTimeout)
	defer cancel()
	k.stopFlow(dctx)

	finished := make(chan struct{})
	go func() {
		k.workers.Wait()
		k.waits.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-dctx.Done():
		k.abandoned.Store(true)
		k.closeErr = k.h.DrainError(int(k.state.Unsettled()), time.Since(start).Round(time.Millisecond))
		k.conn.log.Warn("acemq: a consumer's drain ran out; its unsettled deliveries go back to the queue", slog.String("queue", k.queue), slog.Int("stranded", int(k.state.Unsettled())))
	}
	// Closing the subscriptions puts whatever is still unsettled back on
	// the queue (the broker redelivers it) and lets stranded handlers'
	// settlements fail fast. The closes run in the background: Close
	// waits for them within ctx, and closing the connection ends those
	// still running then (Conn.AwaitClosing).
	k.closeAll()
	k.hcancel()
	closed := k.flow.closes.wait()
	select {
	case <-closed:
	default:
		select {
		case <-closed:
		case <-ctx.Done():
			k.closeErr = errors.Join(k.closeErr, k.closingError(ctx.Err()))
			k.conn.log.Warn("acemq: a consumer's subscription was still closing when the context ended; closing the connection ends it", slog.String("queue", k.queue))
		}
	}
	k.h.Unregister()
	close(k.done)
	return k.closeErr
}

// closingError is the error of a Close whose ctx ended with cause while
// the subscription was still closing.
func (k *Loop[E]) closingError(cause error) error {
	if k.h.ClosingError != nil {
		return k.h.ClosingError(cause)
	}
	return fmt.Errorf("the consumer of %q was still closing its subscription when the context ended (closing the connection ends it): %w", k.queue, cause)
}

// errStranded is the Err of the settlement recorded for a delivery whose
// handler was still running when the drain ran out.
var errStranded = errors.New("the consumer closed before the delivery was settled; the broker redelivers it")
