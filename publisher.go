package acemq

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/acemq/acemq/driver"
)

// Publisher sends typed payloads to one exchange through a codec (JSON by
// default). Messages are persistent, mandatory and confirmed by default. A
// Publisher is safe for concurrent use; many goroutines calling Send share
// the connection's pipelined confirms.
type Publisher[T any] struct {
	c        *Conn
	exchange string
	cfg      publisherConfig
	err      error // a mistake in the options, returned by every Send
	// intercept is the connection's publish interceptors, then the
	// publisher's (pipeline.go).
	intercept []PublishInterceptor
	gate      gate // Pause and Resume (flow.go)
	// boxes shares the boxed header values that repeat from message to
	// message (header_boxes.go).
	boxes headerBoxes
}

// NewPublisher returns a publisher of T values to exchange ("" is the
// default exchange, which routes by queue name).
//
// Mistakes in the options (WithCodec(nil)) are returned by every Send and
// SendAll, since building a publisher cannot fail.
func NewPublisher[T any](c *Conn, exchange string, opts ...PublisherOption) *Publisher[T] {
	p := &Publisher[T]{c: c, exchange: exchange, cfg: publisherConfig{codec: JSON}}
	for _, o := range opts {
		o.applyPublisher(&p.cfg)
	}
	if c == nil {
		p.err = errors.New("acemq: NewPublisher was given a nil connection")
	} else if p.err = p.cfg.validate(); p.err == nil {
		p.intercept = append(append([]PublishInterceptor(nil), c.publishIcpt...), p.cfg.intercept...)
	}
	return p
}

// Send encodes v, publishes it with routing key key and waits for the
// broker's confirm. It returns the envelope as sent (its ID is the message
// id). A message nothing routes fails with a *driver.ReturnError; a blocked
// connection with an error wrapping ErrBlocked.
func (p *Publisher[T]) Send(ctx context.Context, key string, v T, opts ...SendOption) (env Envelope, err error) {
	if p.err != nil {
		return Envelope{}, p.err
	}
	// The envelope is built and sent in place, in the result: an Envelope
	// is large, and the publish path copies none but WithEnvelope's.
	var sc sendConfig
	if len(opts) > 0 {
		sendOptions(opts, &sc)
		if err := sc.validate(); err != nil {
			return Envelope{}, err
		}
		if sc.env != nil {
			env = *sc.env
		}
	}
	if err := p.gate.wait(ctx); err != nil {
		return Envelope{}, err
	}
	var m driver.Message
	if err := p.message(ctx, key, v, &env, &m); err != nil {
		return Envelope{}, err
	}
	sc.apply(&m)
	if err := p.c.publish(ctx, m, &env); err != nil {
		return env, fmt.Errorf("acemq: publishing to exchange %q with routing key %q: %w", m.Exchange, m.RoutingKey, err)
	}
	return env, nil
}

// message encodes v, runs the publish interceptors and builds the driver
// message of one publish into m (a zero Message), completing *env, the message's envelope
// as given, into the envelope as sent. Both are filled in place: an
// Envelope and a driver.Message are large, and the publish path copies
// neither.
func (p *Publisher[T]) message(ctx context.Context, key string, v T, env *Envelope, m *driver.Message) error {
	body, err := p.cfg.codec.Encode(v)
	if err != nil {
		return err
	}
	p.completeEnvelope(env)
	exchange, contentType := p.exchange, p.cfg.codec.ContentType()
	if len(p.intercept) > 0 {
		if err := interceptPublish(ctx, p.intercept, &exchange, &key, env, contentType, body); err != nil {
			return err
		}
		p.completeEnvelope(env)
	}
	messageBoxed(m, exchange, key, env, contentType, body, &p.boxes)
	m.Mandatory = !p.cfg.allowUnroutable
	m.Transient = p.cfg.transient
	return nil
}

// completeEnvelope makes *env the envelope of an application publish: the
// defaults applied (a fresh envelope for the zero value) and the
// connection's origin when it names none. An application publish is a new
// message: unknown x-acemq-* headers of a delivered envelope belong to that
// delivery's republishes only (docs/wire.md §2.5), never to what a handler
// sends with it.
func (p *Publisher[T]) completeEnvelope(env *Envelope) {
	if !env.built() {
		*env = Envelope{}
		env.applyDefaults()
	}
	env.reserved = nil
	if env.origin == "" {
		env.origin = p.c.origin
	}
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
// failed, a *BatchError summarising them. On RabbitMQ each message is
// encoded just before it is published, so that encoding overlaps the
// broker's work on the messages before it; a message that cannot be
// encoded fails alone.
func (p *Publisher[T]) SendAll(ctx context.Context, msgs []Outgoing[T]) ([]SendResult, error) {
	results := make([]SendResult, len(msgs))
	if p.err != nil {
		for i := range results {
			results[i].Err = p.err
		}
		return results, batchError(results)
	}
	if err := p.gate.wait(ctx); err != nil {
		for i := range results {
			results[i].Err = err
		}
		return results, batchError(results)
	}
	// Each message and envelope is built in place, in the results.
	errs := p.c.publishEach(ctx, len(msgs), func(i int) (dm driver.Message, env Envelope, err error) {
		m := &msgs[i]
		env = m.Envelope
		if err = p.message(ctx, m.RoutingKey, m.Payload, &env, &dm); err != nil {
			return dm, Envelope{}, err
		}
		results[i].Envelope = env
		return dm, env, nil
	})
	for i, err := range errs {
		results[i].Err = err
	}
	return results, batchError(results)
}

// SendSeq publishes every message msgs yields, in order, from the calling
// goroutine, without waiting for each confirm before sending the next: up
// to the connection's WithMaxOutstanding publishes await their confirms at
// once, and the window slides as they arrive, however many messages msgs
// yields. It is for one goroutine with a long or endless run of messages
// (rows of a table, lines of a file, a replay): it keeps the broker as busy
// as a window of raw amqp091 publishes would, and holds no more than a
// window of messages in memory. SendAll instead waits for the last confirm
// of each batch before it returns.
//
// result, when not nil, is called once for each message, in order, with its
// envelope as sent and its outcome (Err nil when confirmed), on the calling
// goroutine, inside SendSeq. An outcome is known when the confirm arrives
// and reported when msgs yields its next message or ends, so a sequence
// that waits between messages reports late; goroutines calling Send report
// each confirm as it arrives. Its place in the connection's window, which
// every publisher of the connection shares, does not wait for the report:
// while msgs waits, a Send short of a place takes back those of SendSeq's
// confirmed messages. A message that cannot be encoded, that an
// interceptor refuses or that nothing routes fails alone.
//
// SendSeq returns nil when every message was confirmed, and a *BatchError
// counting them when any failed (its Results is nil: each result went to
// result). When ctx ends, SendSeq stops taking messages from msgs, reports
// those outstanding (with ctx's error where no confirm arrived: they may or
// may not have been delivered) and returns an error wrapping ctx's error
// and, when any failed, the *BatchError. While the publisher is paused it
// waits before each message. A publisher built with a mistake in its
// options returns that mistake at once and takes nothing from msgs. A
// panic in msgs or result goes on to the caller; the publishes it leaves
// unreported finish on their own and give their place in the window back.
//
// On a driver without driver.EachPublisher each message is published and
// confirmed before the next is taken.
func (p *Publisher[T]) SendSeq(ctx context.Context, msgs iter.Seq[Outgoing[T]], result func(SendResult)) error {
	if p.err != nil {
		return p.err
	}
	be := &BatchError{}
	var stopped error
	var d draft
	p.c.publishSeq(ctx, func(yield func(*draft) bool) {
		for o := range msgs {
			if err := p.gate.wait(ctx); err != nil {
				stopped = err
				d = draft{Err: err}
				yield(&d)
				return
			}
			d.M, d.Env = driver.Message{}, o.Envelope
			if d.Err = p.message(ctx, o.RoutingKey, o.Payload, &d.Env, &d.M); d.Err != nil {
				d.Env = Envelope{}
			}
			if !yield(&d) {
				// The connection stops taking messages only when ctx ends.
				stopped = fmt.Errorf("acemq: SendSeq stopped taking messages when the context ended: %w", context.Cause(ctx))
				return
			}
		}
	}, func(env Envelope, err error) {
		be.Total++
		if err == nil {
			be.Confirmed++
		} else {
			be.Failed++
			if be.First == nil {
				be.First = err
			}
		}
		if result != nil {
			result(SendResult{Envelope: env, Err: err})
		}
	})
	switch {
	case be.Failed == 0:
		return stopped
	case stopped == nil:
		return be
	default:
		return errors.Join(stopped, be)
	}
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

// apply sets the per-message properties the options chose on m.
func (c *sendConfig) apply(m *driver.Message) {
	if c.ttlSet {
		ms := c.ttl.Milliseconds()
		if time.Duration(ms)*time.Millisecond < c.ttl {
			ms++ // round up: a message never expires earlier than asked
		}
		m.Expiration = strconv.FormatInt(ms, 10)
	}
	if c.prioritySet {
		m.Priority = c.priority
	}
}

// sendOptions applies Send's options to *sc. The options of this package
// are applied by their type rather than through the interface, which lets
// the compiler keep them and the configuration off the heap (WithEnvelope's
// envelope is taken by pointer, not copied); any other SendOption
// (applySend is unexported, so one this package adds later) is applied
// through the interface by the default branch, so that no option can be
// ignored.
func sendOptions(opts []SendOption, sc *sendConfig) {
	for _, o := range opts {
		switch so := o.(type) {
		case *envelopeOption:
			so.applySend(sc)
		case expirationOption:
			so.applySend(sc)
		case priorityOption:
			so.applySend(sc)
		default:
			// Through a copy, so that only such an option costs an
			// allocation: sc given to an interface method would escape.
			c := new(sendConfig)
			*c = *sc
			o.applySend(c)
			*sc = *c
		}
	}
}
