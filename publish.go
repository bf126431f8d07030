package acemq

import (
	"context"
	"fmt"
	"iter"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
)

// The connection's one publish path is its engine's (internal/engine):
// everything the library publishes — application messages, retry copies,
// dead letters, replies, pipeline hops, replays — goes through it, with its
// telemetry; the methods here give it the envelope a span names.

// messageBoxed fills *m, a zero driver.Message, with the driver message
// for a publish of env's message (env is built): the envelope written into
// the headers (its repeating values boxed through boxes, a publisher's,
// header_boxes.go; nil boxes each afresh), its id as the AMQP message-id.
// It sets the fields one by one, in place: a whole Message assigned
// through m would be built on the stack and copied.
func messageBoxed(m *driver.Message, exchange, routingKey string, env *Envelope, contentType string, body []byte, boxes *headerBoxes) {
	m.Headers, m.HeaderSize = env.writeHeaders(nil, routingKey, boxes)
	m.Exchange, m.RoutingKey = exchange, routingKey
	m.Mandatory = true
	m.ContentType = contentType
	m.MessageID = env.id
	m.Body = body
}

// publish sends m through the engine's one publish path. *env is m's
// envelope when the caller has it (the span reads its identity from it),
// else the zero Envelope (the identity is read from m's headers). It is
// read only when the publish is observed, and not kept.
func (c *Conn) publish(ctx context.Context, m driver.Message, env *Envelope) error {
	return c.eng.PublishIdentified(ctx, m, func() engine.Identity { return identity(env) })
}

// identity is the identity a publish span names for env: none when env
// was not built (the span reads the message's headers).
func identity(env *Envelope) engine.Identity {
	if !env.built() {
		return engine.Identity{}
	}
	// The fields, not the methods of the value, which would copy *env.
	return engine.Identity{ID: env.id, Type: env.typ, CorrelationID: env.correlationID}
}

// draft is one message of a sequence publish as its producer made it.
type draft = engine.Draft[Envelope]

// publishSeq is engine.PublishSeq over the connection's engine (see there).
func (c *Conn) publishSeq(ctx context.Context, drafts iter.Seq[*draft], result func(Envelope, error)) {
	engine.PublishSeq(ctx, c.eng, drafts, identity, nothingPublished, result)
}

// publishEach is engine.PublishEach over the connection's engine (see
// there).
func (c *Conn) publishEach(ctx context.Context, n int, build func(i int) (driver.Message, Envelope, error)) []error {
	return engine.PublishEach(ctx, c.eng, n, build, identity, nothingPublished)
}

// nothingPublished is the error of a message of a sequence publish left
// unpublished when ctx ended with cause.
func nothingPublished(cause error) error {
	return fmt.Errorf("acemq: nothing was published: %w", cause)
}
