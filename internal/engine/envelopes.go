package engine

import "github.com/acemq/acemq/driver"

// EnvelopeWriter writes package acemq's envelope (E: this package cannot
// name acemq.Envelope) into a header table as acemq's publishers do, for
// the packages built on it that publish messages of their own (rpc's
// requests and replies): the table acemq.Envelope.AppendHeaders writes,
// together with its encoded size for driver.Message.HeaderSize, so that
// the driver need not walk the table again, and with the values that
// repeat from one message to the next (type, correlation, causation,
// origin) boxed once per writer. Package acemq makes the writers (see
// NewConn); NewEnvelopeWriter hands out one.
type EnvelopeWriter[E any] interface {
	// WriteHeaders returns a new table holding env's headers for
	// routingKey, and its encoded size, length prefix included (0 when a
	// value is not a flat scalar: the driver then measures the table).
	// env goes by value: through an interface a pointer would move the
	// caller's envelope to the heap. Safe for concurrent use.
	WriteHeaders(env E, routingKey string) (driver.Table, int)
}

// NewEnvelopeWriter returns a new writer of c's envelopes, E being
// acemq.Envelope, with boxes of its own: one per requester or responder,
// whose messages repeat the same type and origin. It is nil when c was
// made without envelope writers or E is not the type they write.
func NewEnvelopeWriter[E any](c *Conn) EnvelopeWriter[E] {
	if c == nil || c.envelopes == nil {
		return nil
	}
	w, _ := c.envelopes().(EnvelopeWriter[E])
	return w
}
