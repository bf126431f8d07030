package acemq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/driver"
)

// Message is one delivery handed to a handler: the decoded payload, the
// envelope read from the headers, and the delivery's AMQP details.
type Message[T any] struct {
	Payload  T
	Envelope Envelope
	// Queue is the queue the consumer reads.
	Queue         string
	Exchange      string
	RoutingKey    string
	ContentType   string
	ReplyTo       string
	CorrelationID string
	// Redelivered is the broker's flag: the message was delivered before and
	// not settled. It is not the attempt; Envelope.Attempt is.
	Redelivered bool
	// Body is the raw body as delivered. Do not modify it.
	Body []byte
}

// Handler processes one message and returns its decision.
type Handler[T any] func(ctx context.Context, m Message[T]) Ack

// Defaults of Consume.
const (
	DefaultPrefetch           = 20
	DefaultDrainTimeout       = 20 * time.Second
	DefaultSettlementDeadline = 30 * time.Second
)

// ConsumeOption configures Consume.
type ConsumeOption interface{ applyConsume(*consumeConfig) }

type consumeOptionFunc func(*consumeConfig)

func (f consumeOptionFunc) applyConsume(c *consumeConfig) { f(c) }

type consumeConfig struct {
	codec        Codec
	concurrency  int
	prefetch     int
	tag          string
	retry        RetryPolicy
	noDeclare    bool
	drainTimeout time.Duration
}

// Concurrency runs n handlers at once (default 1, which keeps order).
func Concurrency(n int) ConsumeOption {
	return consumeOptionFunc(func(c *consumeConfig) { c.concurrency = n })
}

// Prefetch sets how many unacknowledged deliveries the broker hands the
// consumer at once (default 20).
func Prefetch(n int) ConsumeOption {
	return consumeOptionFunc(func(c *consumeConfig) { c.prefetch = n })
}

// ConsumerTag sets the consumer tag (default acemq-{queue}).
func ConsumerTag(tag string) ConsumeOption {
	return consumeOptionFunc(func(c *consumeConfig) { c.tag = tag })
}

// WithRetry sets the retry policy (default NoRetry: one attempt).
func WithRetry(p RetryPolicy) ConsumeOption {
	return consumeOptionFunc(func(c *consumeConfig) { c.retry = p })
}

// NoDeclare starts the consumer without declaring anything: no acemq.dlx,
// {queue}.dlq, {queue}.parked or rungs. Set-asides then fail (and the
// message is put back) when those queues do not exist.
func NoDeclare() ConsumeOption {
	return consumeOptionFunc(func(c *consumeConfig) { c.noDeclare = true })
}

// DrainTimeout bounds how long Close waits for running handlers (default
// 20 s).
func DrainTimeout(d time.Duration) ConsumeOption {
	return consumeOptionFunc(func(c *consumeConfig) { c.drainTimeout = d })
}

// Consumer is a running consumer started by Consume.
type Consumer struct{ core *consumerCore }

// Consume starts a consumer of queue: every delivery is read into an
// envelope, decoded into a T, handed to h, and settled as h decides. Before
// subscribing it declares the dead-letter half ({queue}.dlq, {queue}.parked
// on acemq.dlx) and, when the retry policy needs them, the rungs; never the
// queue itself. ctx bounds the start-up only: stop the consumer with Close.
func Consume[T any](ctx context.Context, c *Conn, queue string, h Handler[T], opts ...ConsumeOption) (*Consumer, error) {
	if h == nil {
		return nil, errors.New("acemq: Consume needs a handler")
	}
	if queue == "" {
		return nil, errors.New("acemq: Consume needs a queue name")
	}
	cfg := consumeConfig{codec: JSON, concurrency: 1, prefetch: DefaultPrefetch, drainTimeout: DefaultDrainTimeout}
	for _, o := range opts {
		o.applyConsume(&cfg)
	}
	if cfg.concurrency < 1 {
		return nil, fmt.Errorf("acemq: concurrency must be at least 1, not %d", cfg.concurrency)
	}
	if cfg.prefetch < 0 {
		return nil, fmt.Errorf("acemq: prefetch must not be negative, not %d", cfg.prefetch)
	}
	if cfg.tag == "" {
		cfg.tag = "acemq-" + queue
	}
	cfg.retry = cfg.retry.orDefault()
	codec := cfg.codec
	k := &consumerCore{conn: c, queue: queue, cfg: cfg}
	k.handle = func(ctx context.Context, d *driver.Delivery, env Envelope) (Ack, error) {
		var v T
		if err := decode(codec, d.Body, d.ContentType, &v); err != nil {
			return Ack{}, err
		}
		return h(ctx, Message[T]{
			Payload:       v,
			Envelope:      env,
			Queue:         queue,
			Exchange:      d.Exchange,
			RoutingKey:    d.RoutingKey,
			ContentType:   d.ContentType,
			ReplyTo:       d.ReplyTo,
			CorrelationID: d.CorrelationID,
			Redelivered:   d.Redelivered,
			Body:          d.Body,
		}), nil
	}
	if err := k.start(ctx); err != nil {
		return nil, err
	}
	return &Consumer{k}, nil
}

// Queue is the queue the consumer reads.
func (c *Consumer) Queue() string { return c.core.queue }

// Tag is the consumer tag.
func (c *Consumer) Tag() string { return c.core.cfg.tag }

// Running reports whether the consumer is subscribed and not closing.
func (c *Consumer) Running() bool { return c.core.running.Load() }

// InFlight is the number of handlers running now.
func (c *Consumer) InFlight() int { return int(c.core.inflight.Load()) }

// Done is closed when the consumer has stopped.
func (c *Consumer) Done() <-chan struct{} { return c.core.done }

// Close stops the consumer with a bounded drain: no new deliveries are
// started; delivered but unstarted ones go back to the queue; running
// handlers finish with their context intact, within the drain timeout (and
// ctx). A drain that runs out returns a *DrainError saying how many were
// stranded; the broker redelivers those.
func (c *Consumer) Close(ctx context.Context) error { return c.core.close(ctx) }

// DrainError reports a drain that ran out of time.
type DrainError struct {
	Queue    string
	Stranded int
	Timeout  time.Duration
}

func (e *DrainError) Error() string {
	return fmt.Sprintf("acemq: the consumer of %q did not drain within %s: %d deliveries were stranded and will be redelivered by the broker", e.Queue, e.Timeout, e.Stranded)
}

type consumerCore struct {
	conn   *Conn
	queue  string
	cfg    consumeConfig
	handle func(ctx context.Context, d *driver.Delivery, env Envelope) (Ack, error)

	sub      driver.Subscription
	dispatch chan driver.Delivery
	stopping chan struct{}
	done     chan struct{}
	hctx     context.Context
	hcancel  context.CancelFunc
	workers  sync.WaitGroup
	waits    sync.WaitGroup // in-consumer retry waits (timers)
	reader   sync.WaitGroup
	inflight atomic.Int64
	running  atomic.Bool
	ended    atomic.Bool // the subscription ended without Close (Conn.Health)
	stopOnce sync.Once
	closeMu  sync.Mutex
	closeErr error
	closed   bool
}

func (k *consumerCore) start(ctx context.Context) error {
	if !k.cfg.noDeclare {
		if err := declareDeadLetterHalf(ctx, k.conn.t, k.queue, k.cfg.retry); err != nil {
			return err
		}
	}
	k.conn.mu.Lock()
	if k.conn.closed {
		k.conn.mu.Unlock()
		return errors.New("acemq: the connection is closed")
	}
	k.conn.consumers[k] = struct{}{}
	k.conn.mu.Unlock()

	sub, err := k.conn.t.Consume(ctx, driver.ConsumeSpec{Queue: k.queue, Tag: k.cfg.tag, Prefetch: k.cfg.prefetch})
	if err != nil {
		k.unregister()
		return fmt.Errorf("acemq: subscribing to %q: %w", k.queue, err)
	}
	k.sub = sub
	k.dispatch = make(chan driver.Delivery)
	k.stopping = make(chan struct{})
	k.done = make(chan struct{})
	k.hctx, k.hcancel = context.WithCancel(context.WithoutCancel(ctx))
	k.running.Store(true)
	k.reader.Add(1)
	go k.read()
	for i := 0; i < k.cfg.concurrency; i++ {
		k.workers.Add(1)
		go k.work()
	}
	return nil
}

func (k *consumerCore) unregister() {
	k.conn.mu.Lock()
	delete(k.conn.consumers, k)
	k.conn.mu.Unlock()
}

// read moves deliveries from the subscription to the workers; once the
// consumer is stopping, deliveries not yet started go back to the queue.
func (k *consumerCore) read() {
	defer k.reader.Done()
	defer close(k.dispatch)
	for d := range k.sub.Deliveries() {
		select {
		case <-k.stopping:
			_ = d.Nack(true)
			continue
		default:
		}
		select {
		case k.dispatch <- d:
		case <-k.stopping:
			_ = d.Nack(true)
		}
	}
	select {
	case <-k.stopping:
	default:
		k.ended.Store(true) // the subscription ended without Close
	}
	k.running.Store(false)
}

func (k *consumerCore) work() {
	defer k.workers.Done()
	for d := range k.dispatch {
		k.process(&d)
	}
}

func (k *consumerCore) close(ctx context.Context) error {
	k.closeMu.Lock()
	defer k.closeMu.Unlock()
	if k.closed {
		return k.closeErr
	}
	k.closed = true
	k.running.Store(false)
	close(k.stopping)
	timeout := k.cfg.drainTimeout
	dctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	_ = k.sub.Cancel(dctx)

	finished := make(chan struct{})
	go func() {
		k.reader.Wait()
		k.workers.Wait()
		k.waits.Wait()
		close(finished)
	}()
	select {
	case <-finished:
	case <-dctx.Done():
		stranded := int(k.inflight.Load())
		k.hcancel()
		k.closeErr = &DrainError{Queue: k.queue, Stranded: stranded, Timeout: timeout}
	}
	_ = k.sub.Close()
	if k.closeErr != nil {
		// Give the workers a moment to observe the cancelled context; the
		// subscription is closed so their settlements fail and the broker
		// redelivers.
		select {
		case <-finished:
		case <-time.After(time.Second):
		}
	}
	k.hcancel()
	k.unregister()
	close(k.done)
	return k.closeErr
}
