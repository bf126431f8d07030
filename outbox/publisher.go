package outbox

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
)

// Publisher records typed payloads for one exchange in a Store, in the
// shape of acemq.Publisher: Send encodes the payload with the codec (JSON
// by default), builds the envelope and stores the whole message; the relay
// publishes it later. A Publisher is safe for concurrent use.
type Publisher[T any] struct {
	store    Store
	exchange string
	cfg      publisherConfig
	err      error
}

// NewPublisher returns a publisher recording T values for exchange ("" is
// the default exchange) in store. Mistakes in the options are returned by
// every Send.
func NewPublisher[T any](store Store, exchange string, opts ...PublisherOption) *Publisher[T] {
	p := &Publisher[T]{store: store, exchange: exchange, cfg: publisherConfig{codec: acemq.JSON, mandatory: true, persistent: true}}
	for _, o := range opts {
		o.applyPublisher(&p.cfg)
	}
	switch {
	case store == nil:
		p.err = errors.New("outbox: NewPublisher was given a nil store")
	case p.cfg.codec == nil:
		p.err = errors.New("outbox: WithCodec was given a nil codec")
	}
	return p
}

// Send records v for routing key key through tx (the application's
// transaction: the record commits or rolls back with the application's own
// writes; nil for the memory store). It returns the envelope as it will be
// published: its ID is the message id the relay publishes, every time it
// publishes it, so a consumer's inbox recognises a record published twice.
// Its origin is the one given with WithEnvelope, or else empty: the relay
// publishes such a record with its connection's origin (acemq.WithOrigin).
func (p *Publisher[T]) Send(ctx context.Context, tx Execer, key string, v T, opts ...SendOption) (acemq.Envelope, error) {
	if p.err != nil {
		return acemq.Envelope{}, p.err
	}
	var sc sendConfig
	for _, o := range opts {
		o.applySend(&sc)
	}
	rec, env, err := p.record(key, v, sc.env)
	if err != nil {
		return acemq.Envelope{}, err
	}
	if err := p.store.Add(ctx, tx, rec); err != nil {
		return env, fmt.Errorf("outbox: recording a message for exchange %q with routing key %q: %w", p.exchange, key, err)
	}
	return env, nil
}

// SendAll records every message through tx, in order, in one call to the
// store. It returns the envelopes in order; on failure nothing was
// recorded by this call (with a transaction, roll it back).
func (p *Publisher[T]) SendAll(ctx context.Context, tx Execer, msgs []acemq.Outgoing[T]) ([]acemq.Envelope, error) {
	if p.err != nil {
		return nil, p.err
	}
	recs := make([]Record, len(msgs))
	envs := make([]acemq.Envelope, len(msgs))
	for i, m := range msgs {
		r, env, err := p.record(m.RoutingKey, m.Payload, m.Envelope)
		if err != nil {
			return nil, fmt.Errorf("outbox: message %d of %d: %w", i+1, len(msgs), err)
		}
		recs[i], envs[i] = r, env
	}
	if err := p.store.Add(ctx, tx, recs...); err != nil {
		return nil, fmt.Errorf("outbox: recording %d messages for exchange %q: %w", len(msgs), p.exchange, err)
	}
	return envs, nil
}

func (p *Publisher[T]) record(key string, v T, env acemq.Envelope) (Record, acemq.Envelope, error) {
	body, err := p.cfg.codec.Encode(v)
	if err != nil {
		return Record{}, acemq.Envelope{}, err
	}
	// A new message: rebuilt from its fields, so that unknown x-acemq-*
	// headers of a delivered envelope stay with that delivery
	// (docs/wire.md §2.5), as acemq.Publisher does. An empty origin stays
	// empty: the relay stamps its connection's (Relay).
	if env, err = acemq.NewEnvelope(env.Fields()); err != nil {
		return Record{}, acemq.Envelope{}, err
	}
	now := time.Now()
	return Record{
		MessageID:   env.ID(),
		Exchange:    p.exchange,
		RoutingKey:  key,
		ContentType: p.cfg.codec.ContentType(),
		Headers:     env.AppendHeaders(nil, key),
		Body:        body,
		Mandatory:   p.cfg.mandatory,
		Transient:   !p.cfg.persistent,
		Recorded:    time.UnixMilli(now.UnixMilli()),
	}, env, nil
}
