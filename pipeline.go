package acemq

import (
	"context"
	"fmt"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
)

// The message pipeline (docs/pipeline.md): publish interceptors, consume
// interceptors and handler middleware. Each is composed once, when the
// publisher or consumer is made; an empty chain costs a length check per
// message and allocates nothing.

// Publishing is an application publish as a publish interceptor sees it,
// after the payload is encoded and before the headers are written. An
// interceptor may change Exchange, RoutingKey and Envelope (assign an
// envelope made with NewEnvelope or Envelope.Change), and set headers with
// SetHeader. It cannot change the body or its content type: the codec made
// them.
type Publishing struct {
	Exchange   string
	RoutingKey string
	// Envelope is the envelope to be sent. Replacing it with one that
	// carries unknown x-acemq-* headers (a delivered message's) does not
	// send them: they belong to that delivery's republishes.
	Envelope    Envelope
	ContentType string
	// Body is the encoded payload. Do not modify it.
	Body []byte

	err error // the first header SetHeader refused
}

// SetHeader sets an application header on the envelope. A reserved name
// (x-acemq-*, docs/wire.md §2.5) is refused with a *ReservedHeaderError and
// a value AMQP cannot carry with a *HeaderValueError; either refusal also
// fails the publish, even when the interceptor ignores the error, since a
// header somebody set and nobody sent is worse than a publish that says no.
func (p *Publishing) SetHeader(name string, value any) error {
	env, err := p.Envelope.Change(func(f *Fields) {
		if f.Headers == nil {
			f.Headers = map[string]any{}
		}
		f.Headers[name] = value
	})
	if err != nil {
		if p.err == nil {
			p.err = err
		}
		return err
	}
	p.Envelope = env
	return nil
}

// A PublishInterceptor sees, and may change, every application publish of
// the publishers it is given to, before it is sent; an error refuses the
// publish (Send returns it, wrapped, and nothing is sent). It never runs on
// the library's own republishes (retries, dead letters, replays, replies;
// docs/wire.md §6.3).
type PublishInterceptor func(ctx context.Context, p *Publishing) error

// A ConsumeInterceptor sees every delivery of the consumers it is given to
// before its body is decoded, as the Message[[]byte] a WithOrderKey key
// function sees: the envelope read from the headers, and the raw body as
// both Payload and Body (do not modify it). It returns the context the rest of the chain
// and the handler run with (ctx itself, or one derived from it: a tenant
// found in a header, say; nil means ctx), or an error that refuses the
// delivery: the message is dead-lettered to {queue}.dlq with the reason
// "an interceptor refused it: …" and outcome rejected, and the handler is
// not called (docs/wire.md §6.1). Its time counts in acemq.consume.duration.
type ConsumeInterceptor func(ctx context.Context, m Message[[]byte]) (context.Context, error)

// reasonRefused is the x-acemq-error prefix of a delivery a consume
// interceptor refused (docs/wire.md §6.2).
const reasonRefused = "an interceptor refused it: "

// interceptPublish runs the publish interceptors over one application
// publish. Called only when there is at least one.
func interceptPublish(ctx context.Context, chain []PublishInterceptor, exchange, key *string, env *Envelope, contentType string, body []byte) error {
	p := &Publishing{Exchange: *exchange, RoutingKey: *key, Envelope: *env, ContentType: contentType, Body: body}
	for _, f := range chain {
		if err := f(ctx, p); err != nil {
			return fmt.Errorf("acemq: a publish interceptor refused the message to exchange %q with routing key %q: %w", *exchange, *key, err)
		}
		if p.err != nil {
			return fmt.Errorf("acemq: a publish interceptor set a header that cannot be sent: %w", p.err)
		}
	}
	*exchange, *key, *env = p.Exchange, p.RoutingKey, p.Envelope
	return nil
}

// interceptConsume runs the consume interceptors over one delivery. Called
// only when there is at least one.
func (k *consumerCore) interceptConsume(ctx context.Context, d *driver.Delivery, env Envelope) (context.Context, error) {
	in := newMessage(d.Body, d, env, k.queue)
	for _, f := range k.intercept {
		next, err := f(ctx, in)
		if err != nil {
			return ctx, err
		}
		if next != nil {
			ctx = next
		}
	}
	return ctx, nil
}

// refusedReason is the x-acemq-error of a delivery refused by err.
func refusedReason(err error) string { return reasonRefused + wire.Describe(err) }

// Middleware wraps a handler: it runs code before and after it, may change
// the context or the message it is given, and may change the Ack it
// returns. WithMiddleware composes several in order; package
// github.com/acemq/acemq/middleware provides the usual ones (timeout, rate
// limit, logging).
type Middleware[T any] func(next Handler[T]) Handler[T]

// chain wraps h in the middleware of cfg, checked to be Middleware[T].
func chain[T any](h Handler[T], mws []any) (Handler[T], error) {
	for i := len(mws) - 1; i >= 0; i-- {
		m, ok := mws[i].(Middleware[T])
		if !ok {
			var zero T
			return nil, fmt.Errorf("acemq: WithMiddleware was given a %T, but the consumer's messages are %T: use WithMiddleware[%T]", mws[i], zero, zero)
		}
		h = m(h)
		if h == nil {
			return nil, fmt.Errorf("acemq: the middleware %d of WithMiddleware returned a nil handler", i+1)
		}
	}
	return h, nil
}
