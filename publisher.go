package acemq

import (
	"context"
	"fmt"
)

// Publisher sends typed payloads to one exchange through a codec (JSON by
// default). Messages are persistent, mandatory and confirmed by default. A
// Publisher is safe for concurrent use; many goroutines calling Send share
// the connection's pipelined confirms.
type Publisher[T any] struct {
	c        *Conn
	exchange string
	cfg      publisherConfig
}

type publisherConfig struct {
	codec           Codec
	transient       bool
	allowUnroutable bool
}

// PublisherOption configures NewPublisher.
type PublisherOption interface{ applyPublisher(*publisherConfig) }

type publisherOptionFunc func(*publisherConfig)

func (f publisherOptionFunc) applyPublisher(c *publisherConfig) { f(c) }

// Transient publishes with delivery mode 1: the broker may lose the
// messages on restart. The default is persistent.
func Transient() PublisherOption {
	return publisherOptionFunc(func(c *publisherConfig) { c.transient = true })
}

// AllowUnroutable turns the mandatory flag off: a message no queue takes is
// dropped silently instead of failing with an *UnroutableError.
func AllowUnroutable() PublisherOption {
	return publisherOptionFunc(func(c *publisherConfig) { c.allowUnroutable = true })
}

// CodecOption chooses the codec of a publisher or a consumer.
type CodecOption struct{ codec Codec }

func (o CodecOption) applyPublisher(c *publisherConfig) { c.codec = o.codec }
func (o CodecOption) applyConsume(c *consumeConfig)     { c.codec = o.codec }

// WithCodec chooses the codec: for a publisher, the one it writes with; for
// a consumer, the one it reads with (a Composite reads several formats).
func WithCodec(c Codec) CodecOption { return CodecOption{c} }

// NewPublisher returns a publisher of T values to exchange ("" is the
// default exchange, which routes by queue name).
func NewPublisher[T any](c *Conn, exchange string, opts ...PublisherOption) *Publisher[T] {
	p := &Publisher[T]{c: c, exchange: exchange, cfg: publisherConfig{codec: JSON}}
	for _, o := range opts {
		o.applyPublisher(&p.cfg)
	}
	return p
}

// Exchange is the exchange the publisher sends to.
func (p *Publisher[T]) Exchange() string { return p.exchange }

// SendOption configures one Send.
type SendOption func(*sendConfig)

type sendConfig struct {
	env Envelope
}

// WithEnvelope sends with env (built with NewEnvelope, or a delivered
// message's envelope changed with With…) instead of a fresh envelope. An
// empty origin is stamped with the connection's. Unknown x-acemq-* headers
// a delivered envelope carries are not sent: they belong to republishes of
// that delivery, not to a message the application publishes.
func WithEnvelope(env Envelope) SendOption { return func(c *sendConfig) { c.env = env } }

// Send encodes v, publishes it with routing key key and waits for the
// broker's confirm. It returns the envelope as sent (its ID is the message
// id). A message nothing routes fails with an *UnroutableError; a blocked
// connection with an error wrapping ErrBlocked.
func (p *Publisher[T]) Send(ctx context.Context, key string, v T, opts ...SendOption) (Envelope, error) {
	var sc sendConfig
	for _, o := range opts {
		o(&sc)
	}
	m, err := p.outbound(key, v, sc.env)
	if err != nil {
		return Envelope{}, err
	}
	if err := p.c.Publish(ctx, m); err != nil {
		return m.Envelope, fmt.Errorf("acemq: publishing to exchange %q with routing key %q: %w", p.exchange, key, err)
	}
	return m.Envelope, nil
}

func (p *Publisher[T]) outbound(key string, v T, env Envelope) (Outbound, error) {
	body, err := p.cfg.codec.Encode(v)
	if err != nil {
		return Outbound{}, err
	}
	// An application publish is a new message: unknown x-acemq-* headers
	// of a delivered envelope belong to that delivery's republishes only
	// (WIRE.md §2.5), never to what a handler sends with it.
	env = env.orDefault().withoutUnknown()
	if env.origin == "" {
		env.origin = p.c.origin
	}
	return Outbound{
		Exchange:        p.exchange,
		RoutingKey:      key,
		Envelope:        env,
		ContentType:     p.cfg.codec.ContentType(),
		Body:            body,
		AllowUnroutable: p.cfg.allowUnroutable,
		Transient:       p.cfg.transient,
	}, nil
}

// Outgoing is one message of a batch.
type Outgoing[T any] struct {
	RoutingKey string
	Payload    T
	// Envelope is optional; the zero value means a fresh one.
	Envelope Envelope
}

// SendResult is the outcome of one message of a batch.
type SendResult struct {
	Envelope Envelope
	Err      error
}

// SendAll publishes every message, then awaits every confirm. It is not
// atomic: it returns one result per message, in order, and, when any
// failed, a *BatchError summarising them.
func (p *Publisher[T]) SendAll(ctx context.Context, msgs []Outgoing[T]) ([]SendResult, error) {
	results := make([]SendResult, len(msgs))
	out := make([]Outbound, 0, len(msgs))
	idx := make([]int, 0, len(msgs))
	for i, m := range msgs {
		o, err := p.outbound(m.RoutingKey, m.Payload, m.Envelope)
		if err != nil {
			results[i].Err = err
			continue
		}
		results[i].Envelope = o.Envelope
		out = append(out, o)
		idx = append(idx, i)
	}
	if len(out) > 0 {
		for j, err := range p.c.PublishBatch(ctx, out) {
			results[idx[j]].Err = err
		}
	}
	return results, batchError(results)
}

// BatchError reports a batch in which some messages were not confirmed.
type BatchError struct {
	Total, Confirmed, Failed int
	// First is the first failure, in batch order.
	First   error
	Results []SendResult
}

// Error counts the failures and names the first.
func (e *BatchError) Error() string {
	return fmt.Sprintf("%d of %d messages were not confirmed; %d were. The first failure was: %v", e.Failed, e.Total, e.Confirmed, e.First)
}

// Unwrap returns the first failure.
func (e *BatchError) Unwrap() error { return e.First }

func batchError(rs []SendResult) error {
	be := &BatchError{Total: len(rs), Results: rs}
	for _, r := range rs {
		if r.Err == nil {
			be.Confirmed++
			continue
		}
		be.Failed++
		if be.First == nil {
			be.First = r.Err
		}
	}
	if be.Failed == 0 {
		return nil
	}
	return be
}
