package acemq

import (
	"context"
	"sync"
	"time"

	"github.com/acemq/acemq/driver"
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

// publish sends m, recording its span and metrics. env is m's envelope when
// the caller has it (the span reads its identity from it), else the zero
// Envelope (the identity is read from m's headers).
func (c *Conn) publish(ctx context.Context, m driver.Message, env Envelope) error {
	start := time.Now()
	ctx, done := c.obs.publishStart(ctx, &m, env)
	err := c.t.Publish(ctx, m)
	done(err, time.Since(start))
	return err
}

// publishBatch publishes every message, then awaits every confirm, and
// returns one error per message (nil for confirmed), in order. envOf, when
// not nil, gives message j's envelope (for its span), else the identity is
// read from the headers. A driver without driver.BatchPublisher publishes
// them at once, one goroutine each.
func (c *Conn) publishBatch(ctx context.Context, ms []driver.Message, envOf func(j int) Envelope) []error {
	dones := make([]func(error, time.Duration), len(ms))
	for i := range ms {
		var env Envelope
		if envOf != nil {
			env = envOf(i)
		}
		_, dones[i] = c.obs.publishStart(ctx, &ms[i], env)
	}
	start := time.Now()
	var errs []error
	if b, ok := c.t.(driver.BatchPublisher); ok {
		errs = b.PublishBatch(ctx, ms)
	} else {
		errs = make([]error, len(ms))
		var wg sync.WaitGroup
		for i := range ms {
			wg.Go(func() { errs[i] = c.t.Publish(ctx, ms[i]) })
		}
		wg.Wait()
	}
	d := time.Since(start)
	for i, done := range dones {
		done(errs[i], d)
	}
	return errs
}

// publishEach publishes n messages, message i made by build, then awaits
// every confirm, and returns one error per message: build's for a message
// that could not be made (nothing was published for it), else its
// publish's. When the driver takes a batch one message at a time
// (driver.EachPublisher), each is made just before it is sent; else all
// are made first and published with publishBatch.
func (c *Conn) publishEach(ctx context.Context, n int, build func(i int) (driver.Message, Envelope, error)) []error {
	ep, ok := c.t.(driver.EachPublisher)
	if !ok {
		return c.buildThenPublish(ctx, n, build)
	}
	ms := make([]driver.Message, n)
	dones := make([]func(error, time.Duration), n)
	start := time.Now()
	errs := ep.PublishEach(ctx, n, func(i int) (*driver.Message, error) {
		m, env, err := build(i)
		if err != nil {
			return nil, err
		}
		ms[i] = m
		_, dones[i] = c.obs.publishStart(ctx, &ms[i], env)
		return &ms[i], nil
	})
	d := time.Since(start)
	for i, done := range dones {
		if done != nil {
			done(errs[i], d)
		}
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
