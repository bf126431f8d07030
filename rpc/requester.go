package rpc

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/topology"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/trace"
)

// DefaultTimeout is the deadline of a call when neither Open nor Ask is
// given WithTimeout.
const DefaultTimeout = 30 * time.Second

// ReplyQueuePrefix begins the name of every generated reply queue:
// acemq-reply-<uuid>.
const ReplyQueuePrefix = "acemq-reply-"

// The two unreserved headers of request and reply (docs/wire.md §3.2). A
// request carries the reply address in HeaderReplyTo and in the AMQP
// reply-to property; a failure reply carries HeaderError = "TypeName:
// message".
const (
	HeaderReplyTo = wire.HeaderReplyTo
	HeaderError   = wire.HeaderReplyError
	// HeaderErrorKind qualifies HeaderError: "refused" on the failure
	// reply to a request refused with Refuse (an expected answer), absent
	// on a failure (docs/request-reply.md).
	HeaderErrorKind = wire.HeaderReplyErrorKind
)

// Requester asks questions of a responder: it owns one reply queue, one
// consumer of its own and the calls still outstanding. Build it with Open;
// it is safe for concurrent use, and one requester per connection, built at
// start-up, serves any number of concurrent calls.
type Requester[Req, Rep any] struct {
	conn       *acemq.Conn
	exchange   string
	routingKey string
	timeout    time.Duration
	codec      acemq.Codec
	replyQueue string
	generated  bool
	tel        *telemetry
	plumb      *engine.Conn
	// headers writes the requests' envelopes with their size, boxing the
	// type and origin once.
	headers engine.EnvelopeWriter[acemq.Envelope]
	// replyHeaders is the application headers of a call made without
	// WithEnvelope, {acemq-reply-to: replyQueue}, built once: NewEnvelope
	// only reads it (it copies the headers into the envelope's own list),
	// so every such call shares it. Nothing writes to it after Open.
	replyHeaders map[string]any

	consumer *acemq.Consumer

	mu     sync.Mutex
	calls  map[string]*call
	free   []*call // calls done with, for the next Ask (at most maxFreeCalls)
	closed bool

	timedOut  atomic.Int64
	unmatched atomic.Int64
}

// call is one outstanding Ask. Whoever removes it from Requester.calls
// under mu (a reply, Close, or the Ask itself giving up) owns its end:
// a reply or Close writes res and then signals done, once; the Ask
// that gave it up signals nothing. So when Ask returns, having either
// removed its call itself or received the one signal, nothing refers to
// the call any more, and it goes on the requester's free list for a later
// Ask. A late reply names the old call's id, which is no longer in calls:
// it is counted unmatched and never reaches the call's next use.
type call struct {
	// done is buffered 1 and is signalled once res is written.
	done chan struct{}
	res  result
}

type result struct {
	msg    acemq.Message[[]byte]
	closed string // non-empty: failed by Close or a stopped consumer, with this reason
}

// maxFreeCalls bounds the free list: the calls kept for reuse once a burst
// of concurrent calls is over.
const maxFreeCalls = 256

// register takes a call from the free list (or makes one) and makes it
// outstanding as id. It fails with ErrClosed after Close.
func (r *Requester[Req, Rep]) register(id string) (*call, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.closed {
		return nil, fmt.Errorf("%w (asking %s)", ErrClosed, r.describe())
	}
	var c *call
	if n := len(r.free); n > 0 {
		c = r.free[n-1]
		r.free[n-1] = nil
		r.free = r.free[:n-1]
	} else {
		c = &call{done: make(chan struct{}, 1)}
	}
	r.calls[id] = c
	return c, nil
}

// release puts a finished call on the free list. Its Ask either removed it
// from calls itself or has received its signal: nothing else refers to it.
func (r *Requester[Req, Rep]) release(c *call) {
	c.res = result{} // drop the reply's body and envelope
	r.mu.Lock()
	if len(r.free) < maxFreeCalls {
		r.free = append(r.free, c)
	}
	r.mu.Unlock()
}

// Open builds a requester that publishes to exchange with routingKey ("" and
// a queue name for the default exchange). It declares the reply queue,
// starts the reply consumer, and returns only when both exist. The
// generated reply queue, acemq-reply-<uuid>, is transient, exclusive,
// auto-deleting and classic, with no x-expires: the broker removes it when
// the connection goes. The reply consumer declares nothing (no .dlq,
// .parked or rungs): every reply is accepted, matched or not.
//
// ctx bounds the start-up only.
func Open[Req, Rep any](ctx context.Context, conn *acemq.Conn, exchange, routingKey string, opts ...RequesterOption) (*Requester[Req, Rep], error) {
	if conn == nil {
		return nil, errors.New("rpc: Open needs a connection")
	}
	cfg := requesterConfig{timeout: DefaultTimeout, codec: acemq.JSON}
	for _, o := range opts {
		o.applyRequester(&cfg)
	}
	if cfg.timeout <= 0 {
		return nil, fmt.Errorf("rpc: WithTimeout(%s): the request timeout must be positive: a requester whose calls time out at once could never succeed; the default is %s", cfg.timeout, DefaultTimeout)
	}
	if cfg.codec == nil {
		return nil, errors.New("rpc: WithCodec was given a nil codec")
	}
	if exchange == "" && routingKey == "" {
		return nil, errors.New("rpc: on the default exchange the routing key is the responder's queue name, and it is empty")
	}
	r := &Requester[Req, Rep]{
		conn:       conn,
		exchange:   exchange,
		routingKey: routingKey,
		timeout:    cfg.timeout,
		codec:      cfg.codec,
		replyQueue: cfg.replyQueue,
		calls:      map[string]*call{},
		plumb:      engine.Of(conn),
	}
	r.headers = engine.NewEnvelopeWriter[acemq.Envelope](r.plumb)
	r.tel = newTelemetry(r.plumb, exchange, routingKey)
	// A named reply queue is an ordinary durable queue (quorum); a
	// generated one is transient, exclusive and auto-deleting, which the
	// topology makes classic (docs/wire.md §5.3, §5.5). A named one has no
	// dead-letter half: the reply consumer accepts every reply, so nothing
	// on it is set aside or returned as failed, and its siblings declare
	// it as a plain quorum queue.
	topo := topology.New().Queue(cfg.replyQueue, topology.WithDeadLettering(false))
	if cfg.replyQueue == "" {
		r.generated = true
		r.replyQueue = ReplyQueuePrefix + uuid.NewString()
		topo = topology.New().Queue(r.replyQueue, topology.WithDurable(false), topology.WithExclusive(), topology.WithAutoDelete())
	}
	r.replyHeaders = map[string]any{HeaderReplyTo: r.replyQueue}
	if err := topo.Apply(ctx, conn); err != nil {
		return nil, fmt.Errorf("rpc: declaring the reply queue %q: %w", r.replyQueue, err)
	}
	// The requester exists before its consumer subscribes, and the handler
	// closes over it: a reply delivered during start-up is counted.
	c, err := acemq.Consume(ctx, conn, r.replyQueue, r.onReply,
		acemq.WithDeclarations(false), acemq.WithCodec(acemq.Bytes), acemq.WithConsumerTag(r.replyQueue))
	if err != nil {
		if r.generated {
			// Nothing half-built is left behind on a connection that lives on.
			_ = topo.Delete(context.WithoutCancel(ctx), conn)
		}
		return nil, fmt.Errorf("rpc: starting the reply consumer on %q: %w", r.replyQueue, err)
	}
	r.consumer = c
	go r.watch()
	return r, nil
}

// watch fails every outstanding call once the reply consumer stops (the
// requester or its connection was closed): no reply can arrive any more.
func (r *Requester[Req, Rep]) watch() {
	<-r.consumer.Done()
	r.shutdown("the reply consumer stopped (was the connection closed?)")
}

// Exchange is the exchange requests are published to.
func (r *Requester[Req, Rep]) Exchange() string { return r.exchange }

// RoutingKey is the routing key of every request.
func (r *Requester[Req, Rep]) RoutingKey() string { return r.routingKey }

// ReplyQueue is the queue replies arrive on.
func (r *Requester[Req, Rep]) ReplyQueue() string { return r.replyQueue }

// Timeout is the requester-wide deadline of a call.
func (r *Requester[Req, Rep]) Timeout() time.Duration { return r.timeout }

// Consumer is the reply consumer.
func (r *Requester[Req, Rep]) Consumer() *acemq.Consumer { return r.consumer }

// TimedOut counts calls that ended without a reply (a *TimeoutError): their
// deadline passed, their context was cancelled, or the requester was closed
// under them. It is valid from the moment Open returns.
func (r *Requester[Req, Rep]) TimedOut() int64 { return r.timedOut.Load() }

// Unmatched counts replies that arrived with nobody waiting: late (after a
// timeout), duplicated, or foreign. They are accepted and dropped, never
// dead-lettered. Unmatched rising together with TimedOut is the signature
// of a responder slower than its callers' timeout.
func (r *Requester[Req, Rep]) Unmatched() int64 { return r.unmatched.Load() }

// Outstanding is the number of calls waiting for a reply now.
func (r *Requester[Req, Rep]) Outstanding() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.calls)
}

// Ask publishes req and waits for the reply, which it decodes into a Rep.
// The call ends at the first of: the reply, the deadline (WithTimeout,
// default the requester's), ctx, or Close. It fails with
//
//   - a *ResponderError when the responder replied that it failed, at once;
//   - the codec's error when the reply cannot be decoded, at once;
//   - a *TimeoutError (errors.Is ErrTimeout) when no reply arrived;
//   - the publish error when the request was not published, for example an
//     *driver.ReturnError: requests are mandatory.
//
// The request's id, correlation and AMQP correlation-id are one fresh UUID
// per call, and the reply address travels in the acemq-reply-to header and
// the AMQP reply-to property. The call is registered before the request is
// published, so a reply that arrives before the publish returns is not
// lost. Ask is safe for concurrent use.
func (r *Requester[Req, Rep]) Ask(ctx context.Context, req Req, opts ...CallOption) (Rep, error) {
	var zero Rep
	cfg := callConfig{timeout: r.timeout}
	for _, o := range opts {
		// The CallOption types are this package's own (applyCall is
		// unexported): applied without a call through the interface, the
		// options stay off the heap on this per-call path.
		switch o := o.(type) {
		case callOption:
			o(&cfg)
		case timeoutOption:
			o.applyCall(&cfg)
		}
	}
	if cfg.timeout <= 0 {
		return zero, fmt.Errorf("rpc: WithTimeout(%s): the request timeout must be positive", cfg.timeout)
	}
	body, err := r.codec.Encode(req)
	if err != nil {
		return zero, fmt.Errorf("rpc: encoding the request with %s: %w", r.codec.ContentType(), err)
	}
	// A request is a new message: built from the given envelope's fields,
	// without the unknown x-acemq-* headers a delivered one carries
	// (docs/wire.md §2.5).
	id := uuid.NewString()
	var f acemq.Fields
	if cfg.env.ID() != "" {
		f = cfg.env.Fields() // its headers are a copy of the envelope's
		f.Headers[HeaderReplyTo] = r.replyQueue
	} else {
		f.Headers = r.replyHeaders // shared, read only
	}
	f.ID, f.CorrelationID = id, id
	if f.Origin == "" {
		f.Origin = r.conn.Origin()
	}
	// The call's clock starts here, before the publish: the caller's wait
	// begins there. A fresh envelope is first seen then too.
	start := time.Now()
	if f.FirstSeen.IsZero() {
		f.FirstSeen = start
	}
	env, err := acemq.NewEnvelope(f)
	if err != nil {
		return zero, fmt.Errorf("rpc: the envelope given with WithEnvelope: %w", err)
	}
	typ := env.Type()
	if typ == "" {
		typ = r.routingKey
	}

	c, err := r.register(id)
	if err != nil {
		return zero, err
	}
	rep, err := r.call(ctx, c, id, typ, &env, body, cfg.timeout, start)
	r.release(c)
	return rep, err
}

// call publishes the request of call c (registered as id) and waits for
// its result. Its Ask releases c once it returns: it has then either
// given c up itself or received its one signal.
func (r *Requester[Req, Rep]) call(ctx context.Context, c *call, id, typ string, env *acemq.Envelope, body []byte, timeout time.Duration, start time.Time) (Rep, error) {
	var zero Rep
	sctx, span := r.tel.start(ctx, id, typ)
	// One deadline for the publish and the wait: pctx ends at the call's
	// deadline or with ctx, whichever comes first.
	pctx, cancel := context.WithTimeout(sctx, timeout)
	defer cancel()

	headers, size := r.headers.WriteHeaders(*env, r.routingKey)
	perr := r.plumb.Publish(pctx, driver.Message{
		Exchange:      r.exchange,
		RoutingKey:    r.routingKey,
		Mandatory:     true,
		ContentType:   r.codec.ContentType(),
		MessageID:     id,
		CorrelationID: id,
		ReplyTo:       r.replyQueue,
		Headers:       headers,
		HeaderSize:    size,
		Body:          body,
	})
	if perr != nil && r.forget(id) {
		if pctx.Err() != nil {
			// The deadline (or ctx) ran out while publishing.
			return zero, r.timedOutCall(span, start, id, timeout, pctx)
		}
		err := fmt.Errorf("rpc: the request to %s was not published: %w", r.describe(), perr)
		r.tel.end(span, failed, time.Since(start), err)
		return zero, err
	}
	// Published, or the publish failed but a reply had already been taken
	// for the call (it did get out): wait for the result.

	select {
	case <-c.done:
	case <-pctx.Done():
		if r.forget(id) {
			if ctx.Err() != nil {
				return zero, r.timedOutCall(span, start, id, timeout, ctx)
			}
			return zero, r.timedOutCall(span, start, id, timeout, nil)
		}
		<-c.done // a reply or Close took the call first
	}
	if c.res.closed != "" {
		r.timedOut.Add(1)
		err := &TimeoutError{ID: id, Exchange: r.exchange, RoutingKey: r.routingKey, Timeout: timeout, Closed: true, Reason: c.res.closed, cause: ErrClosed}
		r.tel.end(span, timedOut, time.Since(start), err)
		return zero, err
	}
	rep, err := r.read(id, &c.res.msg)
	r.tel.end(span, answered, time.Since(start), err)
	return rep, err
}

// timedOutCall records a call that ended without a reply because a
// deadline passed or a context ended: ended is the context that ended (the
// publish context or the caller's), nil for the requester's own timer.
func (r *Requester[Req, Rep]) timedOutCall(span trace.Span, start time.Time, id string, timeout time.Duration, ended context.Context) error {
	r.timedOut.Add(1)
	e := &TimeoutError{ID: id, Exchange: r.exchange, RoutingKey: r.routingKey, Timeout: timeout, cause: context.DeadlineExceeded}
	e.Reason = "within " + timeout.String()
	if ended != nil {
		switch cause := context.Cause(ended); {
		case errors.Is(cause, context.Canceled):
			e.cause = cause
			e.Reason = "before its context was cancelled"
		case ended.Err() != nil:
			if dl, ok := ended.Deadline(); ok && time.Until(dl) <= 0 && dl.Before(start.Add(timeout)) {
				e.Reason = fmt.Sprintf("before its context's deadline (%s after it was asked)", dl.Sub(start).Round(time.Millisecond))
			}
		}
	}
	r.tel.end(span, timedOut, time.Since(start), e)
	return e
}

// forget removes call id and reports whether it was still outstanding. When
// it was not, a reply or Close has taken it and will send its result.
func (r *Requester[Req, Rep]) forget(id string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.calls[id]; !ok {
		return false
	}
	delete(r.calls, id)
	return true
}

// read turns a matched reply into the call's answer.
func (r *Requester[Req, Rep]) read(id string, m *acemq.Message[[]byte]) (Rep, error) {
	var rep Rep
	if v, ok := m.Envelope.Header(HeaderError); ok {
		text, _ := wire.String(v)
		kind, _ := m.Envelope.Header(HeaderErrorKind)
		k, _ := wire.String(kind)
		return rep, &ResponderError{ID: id, Text: text, Reply: m.Envelope, Refused: k == errorKindRefused}
	}
	ct := m.ContentType
	if !r.codec.Accepts(ct) {
		return rep, &acemq.DecodeError{ContentType: ct, Err: fmt.Errorf("the reply to request %s is %q, which the %s codec does not read", id, ct, r.codec.ContentType())}
	}
	if err := r.codec.Decode(m.Body, ct, &rep); err != nil {
		var zero Rep
		return zero, err
	}
	return rep, nil
}

// onReply is the reply consumer's handler: it matches the reply to a call
// and hands it over. Every reply is accepted, matched or not.
func (r *Requester[Req, Rep]) onReply(_ context.Context, m acemq.Message[[]byte]) acemq.Ack {
	if c := r.take(&m); c != nil {
		c.res.msg = m
		c.done <- struct{}{}
	} else {
		r.unmatched.Add(1)
	}
	return acemq.Accept()
}

// take finds and removes the call a reply belongs to (docs/wire.md §8.2), in
// order: the x-acemq-correlation header as written; the AMQP correlation-id
// property; the x-acemq-causation header.
//
// The envelope reader defaults an absent correlation to the message's id,
// so a correlation equal to the reply's own id may not have been written;
// it is then tried last rather than first. A written one equal to the
// reply's id and a property naming a different outstanding call is the
// one case this orders differently from the contract, and no responder of
// the family produces it (their replies have fresh ids).
func (r *Requester[Req, Rep]) take(m *acemq.Message[[]byte]) *call {
	env := &m.Envelope
	corr := env.CorrelationID()
	written := corr != "" && corr != env.ID()
	keys := make([]string, 0, 4)
	if written {
		keys = append(keys, corr)
	}
	keys = append(keys, m.CorrelationID, env.CausationID())
	if !written {
		keys = append(keys, corr)
	}
	r.mu.Lock()
	defer r.mu.Unlock()
	for _, k := range keys {
		if k == "" {
			continue
		}
		if c, ok := r.calls[k]; ok {
			delete(r.calls, k)
			return c
		}
	}
	return nil
}

// shutdown fails every outstanding call with reason and refuses new ones.
func (r *Requester[Req, Rep]) shutdown(reason string) {
	r.mu.Lock()
	r.closed = true
	calls := r.calls
	r.calls = map[string]*call{}
	r.mu.Unlock()
	for _, c := range calls {
		c.res.closed = reason
		c.done <- struct{}{}
	}
}

// Close fails every outstanding call at once with a *TimeoutError saying
// the requester was closed while it was outstanding (rather than leaving it
// to wait out its deadline for a reply that can no longer arrive), then
// stops the reply consumer. A generated reply queue is deleted by the
// broker when its consumer goes; a named one stays. Close is idempotent;
// Ask after Close fails with ErrClosed.
func (r *Requester[Req, Rep]) Close(ctx context.Context) error {
	r.shutdown("the requester was closed")
	return r.consumer.Close(ctx)
}

func (r *Requester[Req, Rep]) describe() string {
	if r.exchange == "" {
		return fmt.Sprintf("queue %q (default exchange)", r.routingKey)
	}
	return fmt.Sprintf("exchange %q with routing key %q", r.exchange, r.routingKey)
}
