package rpc

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/wire"
)

// Handler answers one request: a message in, an answer or an error out. It
// may be slow; raise acemq.WithConcurrency to answer several at once. An
// error is sent back to the caller as a failure reply ("TypeName:
// message") and the request is dead-lettered, as every library of the
// family does; an error made with Refuse is sent back the same way but the
// request is accepted (an expected business failure). A panic is treated
// as an error.
type Handler[Req, Rep any] func(ctx context.Context, m acemq.Message[Req]) (Rep, error)

// Refuse marks err as an expected business failure ("unknown SKU", "out of
// stock"): the caller gets a failure reply carrying err ("TypeName:
// message" of err, without the mark) at once, as for any other handler
// error, marked as a refusal (HeaderErrorKind = "refused", so the caller's
// *ResponderError is Refused and matches ErrRefused), and the request is
// accepted rather than dead-lettered, since there is nothing for an
// operator to look at or replay. Refused counts them. Refuse(nil) is nil.
func Refuse(err error) error {
	if err == nil {
		return nil
	}
	return &refusal{err}
}

// refusal is an error marked with Refuse.
type refusal struct{ err error }

func (r *refusal) Error() string { return r.err.Error() }
func (r *refusal) Unwrap() error { return r.err }

// Responder is a running responder started by Serve: the consumer
// underneath plus the answered and unanswerable counters. Both counters
// exist, at zero, before the consumer subscribes, so a request delivered
// during start-up (a backlog) is counted like any other, and neither needs
// a wait before it can be trusted.
type Responder struct {
	queue        string
	consumer     *acemq.Consumer
	answered     atomic.Int64
	refused      atomic.Int64
	unanswerable atomic.Int64
	bound        *replyBound // the deadline of the replies; Close ends it
}

// ErrNoReplyAddress is the cause given when a request names nowhere to
// reply: neither an acemq-reply-to header nor an AMQP reply-to property. The
// request is dead-lettered to {queue}.dlq.
var ErrNoReplyAddress = errors.New("rpc: the request names no reply address (neither an acemq-reply-to header nor a reply-to property), so it cannot be answered")

// Serve starts a responder on queue: each request is decoded into a Req and
// handed to h, and its answer (or failure) is published to the reply
// address the request names. opts pass through to acemq.Consume, so
// acemq.WithConcurrency, acemq.WithPrefetch, acemq.WithCodec,
// acemq.WithRetry, acemq.WithConsumerTag, acemq.WithDeclarations and
// acemq.WithDrainTimeout mean what they mean there; the codec also encodes
// the replies. Like Consume, Serve declares the queue's dead-letter half
// but never the queue itself.
//
// What happens to a request:
//
//   - no reply address: Unanswerable + 1, dead-lettered as fatal;
//   - h answers: Answered + 1, then the reply is published (not mandatory:
//     a reply that reaches no queue is not an error), then the request is
//     acked; if the reply cannot be published the count is taken back and
//     the request is retried through the retry policy;
//   - h fails (or panics): a failure reply carrying acemq-error is
//     published, no answer is counted, and the request is dead-lettered as
//     a rejection; if the failure reply cannot be published the request is
//     retried instead, since the caller has not been told;
//   - h fails with an error made by Refuse: the same failure reply, then
//     Refused + 1 and the request is accepted;
//   - h fails because the consumer is shutting down (its context was
//     cancelled by the drain): no failure reply, and the request goes back
//     to the broker for another responder.
//
// ctx bounds the start-up only: stop the responder with Close.
func Serve[Req, Rep any](ctx context.Context, conn *acemq.Conn, queue string, h Handler[Req, Rep], opts ...acemq.ConsumeOption) (*Responder, error) {
	if conn == nil {
		return nil, errors.New("rpc: Serve needs a connection")
	}
	if h == nil {
		return nil, errors.New("rpc: Serve needs a handler")
	}
	// The consumer's codec (acemq.WithCodec) also writes the replies.
	codec := engine.Carried(opts, acemq.JSON)
	if codec == nil {
		return nil, errors.New("rpc: Serve was given acemq.WithCodec(nil): pass the codec requests are written in")
	}
	// The handle exists before the consumer subscribes and the handler
	// closes over it: a backlog delivered during start-up is counted.
	r := &Responder{queue: queue, bound: newReplyBound()}
	s := &server[Req, Rep]{base: newBase(conn, codec, r), h: h}
	c, err := acemq.Consume(ctx, conn, queue, s.handle, opts...)
	if err != nil {
		r.bound.close()
		return nil, fmt.Errorf("rpc: starting the responder on %q: %w", queue, err)
	}
	r.consumer = c
	return r, nil
}

// Queue is the queue the responder reads.
func (r *Responder) Queue() string { return r.queue }

// Running reports whether the consumer is subscribed and not closing.
func (r *Responder) Running() bool { return r.consumer.Running() }

// InFlight is the number of requests being handled now.
func (r *Responder) InFlight() int { return r.consumer.InFlight() }

// Answered counts requests answered: incremented before the reply is
// published, so a caller holding its answer sees a count that already
// includes it, and taken back when the publish fails, so it counts replies
// sent rather than attempted. A failure reply counts no answer.
func (r *Responder) Answered() int64 { return r.answered.Load() }

// Refused counts requests answered with a failure reply made by Refuse:
// expected business failures, accepted rather than dead-lettered.
// Incremented once the failure reply is published.
func (r *Responder) Refused() int64 { return r.refused.Load() }

// Unanswerable counts requests that named nowhere to reply.
func (r *Responder) Unanswerable() int64 { return r.unanswerable.Load() }

// Consumer is the consumer underneath, for anything not forwarded here.
func (r *Responder) Consumer() *acemq.Consumer { return r.consumer }

// Done is closed when the responder has stopped.
func (r *Responder) Done() <-chan struct{} { return r.consumer.Done() }

// Close stops the responder as acemq.Consumer.Close stops a consumer: a
// bounded drain of the requests being handled. Requests not finished within
// the drain go back to the broker. Once the drain is over, a reply still
// being published is abandoned (its request goes back to the broker too).
func (r *Responder) Close(ctx context.Context) error {
	err := r.consumer.Close(ctx)
	r.bound.close()
	return err
}

// base is what every handler of a responder shares.
type base struct {
	conn  *acemq.Conn
	plumb *engine.Conn
	codec acemq.Codec
	r     *Responder
	// headers writes the replies' envelopes with their size, boxing the
	// origin (and a reply queue's name) once.
	headers engine.EnvelopeWriter[acemq.Envelope]
}

// newBase is the base of a responder r of conn whose codec is codec.
func newBase(conn *acemq.Conn, codec acemq.Codec, r *Responder) *base {
	plumb := engine.Of(conn)
	return &base{conn: conn, plumb: plumb, codec: codec, r: r, headers: engine.NewEnvelopeWriter[acemq.Envelope](plumb)}
}

type server[Req, Rep any] struct {
	*base
	h Handler[Req, Rep]
}

// ReplyAddress is where a request asks to be answered: the acemq-reply-to
// header first (it survives hops that rebuild a message), then the AMQP
// reply-to property. It is empty when the request names neither.
func ReplyAddress[T any](m acemq.Message[T]) string { return replyAddress(&m.Envelope, m.ReplyTo) }

// replyAddress is ReplyAddress of a message's envelope and reply-to
// property, read in place.
func replyAddress(env *acemq.Envelope, replyTo string) string {
	if v, ok := env.Header(HeaderReplyTo); ok {
		if s, ok := wire.String(v); ok && s != "" {
			return s
		}
	}
	return replyTo
}

func (s *server[Req, Rep]) handle(ctx context.Context, m acemq.Message[Req]) acemq.Ack {
	to := replyAddress(&m.Envelope, m.ReplyTo)
	if to == "" {
		s.r.unanswerable.Add(1)
		return acemq.Reject(acemq.Fatal(ErrNoReplyAddress))
	}
	rep, err := s.call(ctx, &m)
	var body []byte
	if err == nil {
		if body, err = s.codec.Encode(rep); err != nil {
			err = fmt.Errorf("rpc: encoding the reply with %s: %w", s.codec.ContentType(), err)
		}
	}
	if err != nil {
		if ctx.Err() != nil {
			// The drain ran out and cancelled the handler: this responder is
			// going away, and the request goes back to the broker for another
			// one. A failure reply now would fail a call that may yet be
			// answered.
			return acemq.Retry(fmt.Errorf("rpc: the responder was stopped while handling the request: %w", err))
		}
		var rf *refusal
		refused := errors.As(err, &rf)
		if perr := s.reply(ctx, &m.Envelope, m.CorrelationID, to, s.zeroBody(), describe(err), refused); perr != nil {
			// The caller has not been told and is still waiting: another
			// attempt is the only path that can still reach it.
			return acemq.Retry(fmt.Errorf("rpc: the handler failed (%s) and the failure reply could not be published: %w", describe(err), perr))
		}
		if refused {
			s.r.refused.Add(1)
			return acemq.Accept()
		}
		return acemq.Reject(err)
	}
	s.r.answered.Add(1)
	if perr := s.reply(ctx, &m.Envelope, m.CorrelationID, to, body, "", false); perr != nil {
		s.r.answered.Add(-1)
		return acemq.Retry(fmt.Errorf("rpc: the reply could not be published: %w", perr))
	}
	return acemq.Accept()
}

// call runs the handler, turning a panic into an error.
func (s *server[Req, Rep]) call(ctx context.Context, m *acemq.Message[Req]) (rep Rep, err error) {
	defer func() {
		if v := recover(); v != nil {
			err = &acemq.PanicError{Value: v, Stack: debug.Stack()}
		}
	}()
	return s.h(ctx, *m)
}

// zeroBody is the body of a failure reply: the zero Rep, which carries no
// meaning and is never decoded; empty when the codec cannot encode it.
func (s *server[Req, Rep]) zeroBody() []byte {
	var zero Rep
	b, err := s.codec.Encode(zero)
	if err != nil {
		return nil
	}
	return b
}

// reply publishes an answer (or, with errText, a failure, marked refused
// when the handler refused the request) to the reply address through the
// default exchange, not mandatory, with a fresh envelope (docs/wire.md
// §8.4). req and corr are the request's envelope and correlation-id
// property.
func (s *base) reply(ctx context.Context, req *acemq.Envelope, corr, to string, body []byte, errText string, refused bool) error {
	now := time.Now() // the reply's first-seen, and the second its deadline is shared in
	f := acemq.Fields{
		CorrelationID: req.CorrelationID(),
		CausationID:   req.ID(),
		FirstSeen:     now,
		Origin:        s.conn.Origin(),
	}
	if errText != "" {
		f.Headers = map[string]any{HeaderError: errText}
		if refused {
			f.Headers[HeaderErrorKind] = errorKindRefused
		}
	}
	env, err := acemq.NewEnvelope(f)
	if err != nil {
		return err
	}
	if corr == "" {
		corr = req.CorrelationID()
	}
	// The reply goes out even when the handler's context ends meanwhile:
	// the caller is waiting for it. It is bounded like any settlement, by
	// a deadline the replies of one second share (30 to 31 s).
	headers, size := s.headers.WriteHeaders(env, to)
	return s.plumb.Publish(s.r.bound.context(ctx, now), driver.Message{
		RoutingKey:    to,
		ContentType:   s.codec.ContentType(),
		MessageID:     env.ID(),
		CorrelationID: corr,
		Headers:       headers,
		HeaderSize:    size,
		Body:          body,
	})
}

// describe renders err as the family writes causes, "TypeName: message",
// looking through acemq.Fatal's and Refuse's marks to the error they mark.
func describe(err error) string {
	for {
		rf, ok := err.(*refusal)
		if !ok {
			break
		}
		err = rf.err
	}
	return wire.Describe(err)
}
