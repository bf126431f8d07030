package acemq

import (
	"context"
	"fmt"
	"iter"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/fifo"
)

// The connection's one publish path: everything the library publishes —
// application messages, retry copies, dead letters, replies, pipeline hops,
// replays — goes through publish or publishBatch, with its telemetry.

// messageBoxed is the driver message for a publish of env's message: the
// envelope written into the headers (its repeating values boxed through
// boxes, a publisher's, header_boxes.go; nil boxes each afresh), its id as
// the AMQP message-id.
func messageBoxed(exchange, routingKey string, env Envelope, contentType string, body []byte, boxes *headerBoxes) driver.Message {
	env = env.orDefault()
	headers, size := env.writeHeaders(nil, routingKey, boxes)
	return driver.Message{
		Exchange:    exchange,
		RoutingKey:  routingKey,
		Mandatory:   true,
		ContentType: contentType,
		MessageID:   env.id,
		Headers:     headers,
		HeaderSize:  size,
		Body:        body,
	}
}

// publish sends m through the engine's one publish path. env is m's
// envelope when the caller has it (the span reads its identity from it),
// else the zero Envelope (the identity is read from m's headers).
func (c *Conn) publish(ctx context.Context, m driver.Message, env Envelope) error {
	return c.eng.PublishAs(ctx, m, identity(env))
}

// publishBatch publishes every message, then awaits every confirm, through
// the engine's one publish path, and returns one error per message (nil
// for confirmed), in order. envOf, when not nil, gives message j's
// envelope (for its span), else the identity is read from the headers.
func (c *Conn) publishBatch(ctx context.Context, ms []driver.Message, envOf func(j int) Envelope) []error {
	if envOf == nil {
		return c.eng.PublishBatch(ctx, ms)
	}
	return c.eng.PublishBatchAs(ctx, ms, func(j int) engine.Identity { return identity(envOf(j)) })
}

// identity is the identity a publish span names for env: none when env
// was not built (the span reads the message's headers).
func identity(env Envelope) engine.Identity {
	if !env.built() {
		return engine.Identity{}
	}
	return engine.Identity{ID: env.ID(), Type: env.Type(), CorrelationID: env.CorrelationID()}
}

// draft is one message of a sequence publish as its producer made it: the
// driver message and its envelope, or why it could not be made.
type draft struct {
	m   driver.Message
	env Envelope
	err error
}

// sent is a message of a sequence publish awaiting its result: its
// envelope, its telemetry and when it was published.
type sent struct {
	env   Envelope
	done  func(error, time.Duration)
	start time.Time
}

// publishSeq publishes each message drafts yields (a draft with err set is
// not published) and calls result once for each, in order, with its
// envelope and its error (nil for confirmed). drafts may yield the same
// draft every time: it is read before the next is asked for. On a
// driver.EachPublisher the confirm window slides inside the sequence and a
// result is reported when drafts yields its next message or ends; it stops
// taking drafts when ctx ends. Else each message is published and
// confirmed before the next is taken.
func (c *Conn) publishSeq(ctx context.Context, drafts iter.Seq[*draft], result func(Envelope, error)) {
	ep, ok := c.t.(driver.EachPublisher)
	if !ok {
		for d := range drafts {
			err := d.err
			if err == nil && ctx.Err() != nil {
				err = fmt.Errorf("acemq: nothing was published: %w", context.Cause(ctx))
			}
			if err == nil {
				err = c.publish(ctx, d.m, d.env)
			}
			result(d.env, err)
			if ctx.Err() != nil {
				break
			}
		}
		return
	}
	var waiting fifo.Queue[sent]
	ep.PublishEach(ctx, func(yield func(*driver.Message, error) bool) {
		for d := range drafts {
			if d.err != nil {
				waiting.Push(sent{env: d.env})
				if !yield(nil, d.err) {
					return
				}
				continue
			}
			_, done := c.obs.publishStart(ctx, &d.m, identity(d.env))
			waiting.Push(sent{env: d.env, done: done, start: time.Now()})
			if !yield(&d.m, nil) {
				return
			}
		}
	}, func(err error) {
		s := waiting.Pop()
		if s.done != nil {
			s.done(err, time.Since(s.start))
		}
		result(s.env, err)
	})
}

// publishEach publishes n messages, message i made by build, then awaits
// every confirm, and returns one error per message: build's for a message
// that could not be made (nothing was published for it), else its
// publish's. When the driver takes a sequence (driver.EachPublisher), each
// is made just before it is sent; else all are made first and published
// with publishBatch.
func (c *Conn) publishEach(ctx context.Context, n int, build func(i int) (driver.Message, Envelope, error)) []error {
	if _, ok := c.t.(driver.EachPublisher); !ok {
		return c.buildThenPublish(ctx, n, build)
	}
	errs := make([]error, 0, n)
	var d draft
	c.publishSeq(ctx, func(yield func(*draft) bool) {
		for i := range n {
			d.m, d.env, d.err = build(i)
			if !yield(&d) {
				return
			}
		}
	}, func(_ Envelope, err error) { errs = append(errs, err) })
	// The driver stops taking messages when ctx ends.
	for len(errs) < n {
		errs = append(errs, fmt.Errorf("acemq: nothing was published: %w", context.Cause(ctx)))
	}
	return errs
}

// buildThenPublish is publishEach for a driver without
// driver.EachPublisher: every message is made, then those that could be
// are published with publishBatch.
func (c *Conn) buildThenPublish(ctx context.Context, n int, build func(i int) (driver.Message, Envelope, error)) []error {
	errs := make([]error, n)
	out := make([]driver.Message, 0, n)
	envs := make([]Envelope, 0, n)
	// idx maps out to the messages once one could not be made; until then
	// out[j] is message j.
	var idx []int
	for i := range n {
		m, env, err := build(i)
		if err != nil {
			if idx == nil {
				idx = make([]int, len(out), n)
				for j := range idx {
					idx[j] = j
				}
			}
			errs[i] = err
			continue
		}
		if idx != nil {
			idx = append(idx, i)
		}
		out = append(out, m)
		envs = append(envs, env)
	}
	if len(out) == 0 {
		return errs
	}
	for j, err := range c.publishBatch(ctx, out, func(j int) Envelope { return envs[j] }) {
		if idx != nil {
			errs[idx[j]] = err
		} else {
			errs[j] = err
		}
	}
	return errs
}
