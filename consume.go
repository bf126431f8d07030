package acemq

import (
	"context"
	"errors"
	"fmt"
	"math"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/wire"
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
	// FromStream is true for a message read from a stream; Offset is then
	// its offset (x-stream-offset, docs/streams.md), and 0 otherwise.
	FromStream bool
	Offset     int64
}

// DeliveryCount returns the delivery count a RabbitMQ quorum queue wrote on
// the message (its x-delivery-count header) and true, or false when there
// is none (a classic queue, a stream, a first delivery on RabbitMQ 4). What
// it counts depends on the broker: on RabbitMQ 4.3 and later, the earlier
// deliveries that failed (returned with a reject, or unsettled when their
// channel closed) — the count the queue's delivery limit is checked
// against; on 3.x and 4.0 to 4.2, every earlier return, nacks included.
// When it exceeds the queue's delivery limit the broker dead-letters the
// message (docs/reliability.md). Redelivered says only whether there was
// an earlier delivery.
func (m Message[T]) DeliveryCount() (int, bool) {
	v, ok := m.Envelope.Header(deliveryCountHeader)
	if !ok {
		return 0, false
	}
	n, ok := wire.Integer(v)
	if !ok || n < 0 || n > math.MaxInt32 {
		return 0, false
	}
	return int(n), true
}

// deliveryCountHeader is the header a quorum queue counts deliveries in.
const deliveryCountHeader = "x-delivery-count"

// newMessage is the Message of delivery d, read from queue.
func newMessage[T any](payload T, d *driver.Delivery, env Envelope, queue string) Message[T] {
	m := Message[T]{
		Payload:       payload,
		Envelope:      env,
		Queue:         queue,
		Exchange:      d.Exchange,
		RoutingKey:    d.RoutingKey,
		ContentType:   d.ContentType,
		ReplyTo:       d.ReplyTo,
		CorrelationID: d.CorrelationID,
		Redelivered:   d.Redelivered,
		Body:          d.Body,
	}
	m.Offset, m.FromStream = d.StreamOffset()
	return m
}

// Handler processes one message and returns its decision.
type Handler[T any] func(ctx context.Context, m Message[T]) Ack

// Defaults of Consume.
const (
	DefaultPrefetch     = 20
	DefaultDrainTimeout = 20 * time.Second
)

// Consumer is a running consumer started by Consume.
type Consumer struct {
	consumerHandle // found by engine.ConsumerOf (package acemqtest's WaitIdle)
	core           *consumerCore
}

// consumerHandle is embedded in Consumer, unexported, as handle is in Conn.
type consumerHandle = engine.ConsumerHandle

// Consume starts a consumer of queue: every delivery is read into an
// envelope, decoded into a T, handed to h, and settled as h decides (see
// Ack). Before subscribing it declares the dead-letter half (acemq.dlx,
// {queue}.dlq and {queue}.parked with their bindings) and, when the retry
// policy holds waits on the broker, acemq.retry, the rungs and the return
// binding; never the queue itself (declare it with a topology.Topology, or pass one
// with WithTopology). A queue that does not exist refuses the start, with
// an error wrapping ErrNotFound, before anything is declared (the check is
// passive, with a driver.Inspector). A declaration that fails refuses the
// start, as do
// nonsensical options (a concurrency below 1, a negative prefetch, a retry
// policy built with nonsensical values), with an error saying what to
// change. ctx bounds the start-up only: stop the consumer with Close.
func Consume[T any](ctx context.Context, c *Conn, queue string, h Handler[T], opts ...ConsumeOption) (*Consumer, error) {
	if c != nil && h == nil {
		return nil, errors.New("acemq: Consume needs a handler")
	}
	k, err := newConsumer("Consume", c, queue, opts, consumeDefaults())
	if err != nil {
		return nil, err
	}
	if err := k.only("Consume"); err != nil {
		return nil, err
	}
	if h, err = chain(h, k.cfg.middleware); err != nil {
		return nil, err
	}
	k.handle = typed(k.cfg.codec, queue, h)
	return k.started(ctx)
}

// started starts k, whose handle is set, on the consume engine, and
// returns its Consumer. A ctx made by engine.WithStream makes it a stream
// reader.
func (k *consumerCore) started(ctx context.Context) (*Consumer, error) {
	stream := engine.StreamOf(ctx)
	if stream != nil {
		// The handlers' context derives from ctx: a consumer one of them
		// starts is not a stream reader.
		ctx = engine.WithStream(ctx, nil)
	}
	k.loop = engine.NewLoop(k.conn.eng, k.engineConfig(stream), k.hooks())
	if err := k.start(ctx); err != nil {
		return nil, err
	}
	return &Consumer{engine.NewConsumerHandle(k.loop.State()), k}, nil
}

// consumeDefaults is the configuration options are applied over.
func consumeDefaults() consumeConfig {
	return consumeConfig{codec: JSON, concurrency: 1, prefetch: DefaultPrefetch, drainTimeout: DefaultDrainTimeout}
}

// newConsumer checks c, queue and opts (applied over cfg) as every Consume
// variant (named fn in errors) does, and returns the consumer to start:
// the caller sets its handle (ConsumeTypes and ConsumeBatch build theirs
// on the same engine).
func newConsumer(fn string, c *Conn, queue string, opts []ConsumeOption, cfg consumeConfig) (*consumerCore, error) {
	switch {
	case c == nil:
		return nil, fmt.Errorf("acemq: %s needs a connection", fn)
	case queue == "":
		return nil, fmt.Errorf("acemq: %s needs a queue name", fn)
	}
	for _, o := range opts {
		o.applyConsume(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	if cfg.retrySet {
		if err := cfg.retry.Err(); err != nil {
			return nil, fmt.Errorf("acemq: the consumer of %q: %w", queue, err)
		}
	}
	if err := consumerPolicy(c, &cfg, queue); err != nil {
		return nil, err
	}
	if cfg.tag == "" {
		cfg.tag = "acemq-" + queue
	}
	k := &consumerCore{conn: c, queue: queue, cfg: cfg}
	k.intercept = append(append([]ConsumeInterceptor(nil), c.consumeIcpt...), cfg.intercept...)
	return k, nil
}

// engineConfig is the consume engine's configuration of k.
func (k *consumerCore) engineConfig(stream *engine.Stream) engine.Config {
	cfg := engine.Config{Queue: k.queue, Tag: k.cfg.tag, Concurrency: k.cfg.concurrency, Prefetch: k.cfg.prefetch,
		Args: k.cfg.args, DrainTimeout: k.cfg.drainTimeout, Retry: engine.PolicyOf(k.cfg.retry), Stream: stream, Clock: k.conn.Clock()}
	for _, d := range cfg.Retry.BrokerRungs() {
		cfg.Rungs = append(cfg.Rungs, wire.RungQueue(k.queue, d))
	}
	if b := k.cfg.breaker; b != nil {
		cfg.Breaker = &engine.Breaker{ConsecutiveFailures: b.ConsecutiveFailures, FailureRate: b.FailureRate, Window: b.Window, CoolDown: b.CoolDown, IsFailure: b.IsFailure}
	}
	return cfg
}

// hooks are what the consume engine runs k with (dispatcher and emitter
// are in settle.go).
func (k *consumerCore) hooks() engine.Hooks[delivered] {
	h := engine.Hooks[delivered]{
		Dispatch:      k.dispatcher(),
		Emit:          k.emitter(),
		Copy:          copyOf,
		Attempt:       attemptOf,
		BreakerOpened: func() { k.conn.obs.breakerOpen(k.queue) },
		Flush:         k.flush,
		SafeErr:       safeErr,
		Unregister:    k.unregister,
		DrainError: func(stranded int, took time.Duration) error {
			return &DrainError{Queue: k.queue, Stranded: stranded, Timeout: took}
		},
		ClosingError: func(cause error) error {
			return fmt.Errorf("acemq: the consumer of %q was still closing its subscription when the context ended (closing the connection ends it): %w", k.queue, cause)
		},
	}
	if k.cfg.orderKey != nil {
		h.OrderKey = k.orderKeyOf
	}
	return h
}

// Queue is the queue the consumer reads.
func (c *Consumer) Queue() string { return c.core.queue }

// Tag is the consumer tag.
func (c *Consumer) Tag() string { return c.core.cfg.tag }

// Running reports whether the consumer is subscribed and not closing.
func (c *Consumer) Running() bool { return c.core.loop.Running() }

// InFlight is the number of handlers running now.
func (c *Consumer) InFlight() int { return c.core.loop.InFlight() }

// Done is closed when Close has finished.
func (c *Consumer) Done() <-chan struct{} { return c.core.loop.Done() }

// Close stops the consumer with a bounded drain. No new delivery is
// started: deliveries the broker has handed over but no handler has begun
// go back to the queue (nack with requeue, attempt unchanged). Running
// handlers finish with their context intact and are settled as they decide;
// retries waiting in the consumer are republished at once, skipping the
// rest of their wait. All of this within the drain timeout (default 20 s)
// and ctx. A drain that runs out cancels the stranded handlers' context,
// leaves their deliveries unsettled (the broker redelivers them, marked
// redelivered, attempt unchanged, when the subscription closes) and returns
// a *DrainError saying how many there were. The subscription is then
// closed, which puts what is still unsettled back on the queue; Close
// waits for that within ctx too and, if ctx ends first, returns an error
// wrapping ctx's saying the subscription was still closing (Conn.Close
// ends it). Close is idempotent.
func (c *Consumer) Close(ctx context.Context) error { return c.core.close(ctx) }

// close is Close; Conn.Close calls it for each of its consumers.
func (k *consumerCore) close(ctx context.Context) error { return k.loop.Close(ctx) }

// DrainError reports a drain that ran out of time.
type DrainError struct {
	Queue string
	// Stranded is the number of deliveries that were not settled when the
	// drain ran out; the broker redelivers them.
	Stranded int
	// Timeout is how long the drain waited.
	Timeout time.Duration
}

// Error says which consumer did not drain and how many deliveries it
// stranded.
func (e *DrainError) Error() string {
	return fmt.Sprintf("acemq: the consumer of %q did not drain within %s: %d deliveries were stranded and will be redelivered by the broker", e.Queue, e.Timeout, e.Stranded)
}

// consumerCore is what package acemq keeps of a consumer: its
// configuration, the handle its dispatch runs (decode and handler) with
// the consume interceptors, and the consume engine that runs it
// (internal/engine).
type consumerCore struct {
	conn  *Conn
	queue string
	cfg   consumeConfig
	// handle takes the delivery by value: a pointer passed to a function
	// value escapes, and the delivery would be moved to the heap for every
	// message.
	handle func(ctx context.Context, d driver.Delivery, env Envelope) (Ack, error)
	// The connection's consume interceptors, then the consumer's
	// (pipeline.go).
	intercept []ConsumeInterceptor
	flush     func() // ConsumeBatch's: hand over the batch being gathered (batch.go)
	loop      *engine.Loop[delivered]
}

func (k *consumerCore) start(ctx context.Context) error {
	for _, t := range k.cfg.topology {
		if err := t.Apply(ctx, k.conn); err != nil {
			return fmt.Errorf("acemq: %w (declared for the consumer of %q)", err, k.queue)
		}
	}
	if !k.cfg.noDeclare {
		// A consumer that cannot start creates nothing: the queue must
		// exist before its dead-letter half and rungs are declared.
		if in, ok := k.conn.t.(driver.Inspector); ok {
			if _, err := in.InspectQueue(ctx, k.queue); err != nil {
				return fmt.Errorf("acemq: the consumer of %q cannot start, so it declared nothing (declare the queue with a Topology, or pass one with WithTopology): %w", k.queue, err)
			}
		}
		if err := declareDeadLetterHalf(ctx, k.conn.t, k.queue, k.cfg.retry); err != nil {
			return err
		}
	}
	if err := k.loop.Subscribe(ctx); err != nil {
		return fmt.Errorf("acemq: subscribing to %q: %w", k.queue, err)
	}
	// Register and start under the connection's lock, so that a Conn.Close
	// racing with the start either refuses it or finds it fully started.
	k.conn.mu.Lock()
	defer k.conn.mu.Unlock()
	if k.conn.closed {
		k.loop.Abort()
		return fmt.Errorf("acemq: subscribing to %q: %w", k.queue, ErrClosed)
	}
	k.conn.consumers[k] = struct{}{}
	k.loop.Run()
	return nil
}

// State, Stopping and Context are the engine's, for ConsumeBatch's
// batcher (batchHost).
func (k *consumerCore) State() *engine.Consumer   { return k.loop.State() }
func (k *consumerCore) Stopping() <-chan struct{} { return k.loop.Stopping() }
func (k *consumerCore) Context() context.Context  { return k.loop.Context() }

func (k *consumerCore) unregister() {
	k.conn.mu.Lock()
	delete(k.conn.consumers, k)
	k.conn.mu.Unlock()
}
