package schedule

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
)

// Publisher schedules typed payloads for delivery to one exchange later,
// through the scheduler's rungs. It is safe for concurrent use.
type Publisher[T any] struct {
	exchange string
	codec    acemq.Codec
	m        *mover
	err      error // a mistake in the arguments, returned by every send

	mu       sync.Mutex
	declared bool
}

// NewPublisher returns a publisher that schedules T values for exchange
// ("" is the default exchange, which routes by queue name). Mistakes in
// the arguments are returned by every SendAt and SendAfter.
func NewPublisher[T any](conn *acemq.Conn, exchange string, opts ...PublisherOption) *Publisher[T] {
	cfg := publisherConfig{codec: acemq.JSON, ladder: family}
	for _, o := range opts {
		if o != nil {
			o.applyPublisher(&cfg)
		}
	}
	p := &Publisher[T]{exchange: exchange, codec: cfg.codec}
	p.m, p.err = newMover(conn, cfg.ladder)
	if p.err == nil && cfg.codec == nil {
		p.err = errors.New("schedule: WithCodec was given a nil codec: pass acemq.JSON, acemq.Text, acemq.Bytes or a codec of your own")
	}
	return p
}

// SendAfter schedules v for delivery with routing key key d from now (on
// the connection's clock: real time, or a memory:// broker's test clock);
// see SendAt.
func (p *Publisher[T]) SendAfter(ctx context.Context, key string, d time.Duration, v T, opts ...SendOption) (acemq.Envelope, error) {
	now := time.Now()
	if p.m != nil {
		now = p.m.now()
	}
	return p.SendAt(ctx, key, now.Add(d), v, opts...)
}

// SendAt schedules v for delivery with routing key key at the time at. It
// encodes v once; the bytes wait on the scheduler's rungs and are
// delivered verbatim, under the codec's content type, when a control
// consumer (Serve) finds them due. A time less than the shortest rung
// (one second) away, or in the past, is delivered at once, by this call.
//
// It returns the envelope of the message: the delivered message has its
// id, correlation and causation (its attempt is 1 and it is first seen
// when delivered). The first call declares the scheduler's topology
// (Declare). A target nothing routes is reported here only when the
// message is delivered at once; otherwise the control consumer holds it
// back and tries again (docs/scheduling.md).
func (p *Publisher[T]) SendAt(ctx context.Context, key string, at time.Time, v T, opts ...SendOption) (acemq.Envelope, error) {
	if p.err != nil {
		return acemq.Envelope{}, p.err
	}
	var sc sendConfig
	for _, o := range opts {
		if o != nil {
			o.applySend(&sc)
		}
	}
	body, err := p.codec.Encode(v)
	if err != nil {
		return acemq.Envelope{}, fmt.Errorf("schedule: encoding the payload: %w", err)
	}
	// A new message: the given envelope's fields, the connection's origin
	// when it has none, and none of the unknown x-acemq-* headers it may
	// have been read with (docs/wire.md §2.5).
	f := sc.env.Fields()
	if f.Origin == "" {
		f.Origin = p.m.conn.Origin()
	}
	env, err := acemq.NewEnvelope(f)
	if err != nil {
		return acemq.Envelope{}, fmt.Errorf("schedule: %w", err)
	}
	j := job{exchange: p.exchange, routingKey: key, due: at, contentType: p.codec.ContentType(), typ: env.Type()}
	now := p.m.now()
	r, hop := p.m.ladder.next(at.Sub(now))
	if !hop {
		if err := p.m.deliver(ctx, env, j, body, now); err != nil {
			return env, err
		}
		p.m.rec.scheduledOne(ctx, j)
		return env, nil
	}
	if err := p.declare(ctx); err != nil {
		return env, err
	}
	if err := p.m.hopTo(ctx, r, env, j, body); err != nil {
		var ue *driver.ReturnError
		if errors.As(err, &ue) {
			err = fmt.Errorf("%w (is the scheduler's topology deleted? schedule.Declare puts it back)", err)
		}
		return env, err
	}
	p.m.rec.scheduledOne(ctx, j)
	return env, nil
}

// declare applies the ladder's topology once.
func (p *Publisher[T]) declare(ctx context.Context) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.declared {
		return nil
	}
	if err := p.m.ladder.topology().Apply(ctx, p.m.conn); err != nil {
		return fmt.Errorf("schedule: declaring the scheduler's exchange and queues: %w", err)
	}
	p.declared = true
	return nil
}
