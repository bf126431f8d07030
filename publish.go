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
