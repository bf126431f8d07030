package perf

import (
	"time"

	"github.com/acemq/acemq/internal/wire"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Envelope is an envelope written by hand: what a careful application using
// amqp091-go alone writes to carry the same information as an acemq
// envelope, with the same header names, types and values acemq writes
// (docs/wire.md §3: strings, int32 counters, int64 epoch milliseconds), so
// that a raw reference pays for the same bytes, in the client and in the
// broker, as acemq does. Envelope{Origin: conn.Origin()} is what acemq
// writes for a message sent with a fresh envelope on conn. Prepare it once
// and write a table per message with EnvelopeTable.For.
type Envelope struct {
	// Type is x-acemq-type; "" writes the routing key, as acemq does for
	// an envelope without a type.
	Type string
	// Version is x-acemq-version; below 1 writes 1.
	Version int32
	// Correlation is x-acemq-correlation; "" writes the message id, the
	// contract's default.
	Correlation string
	// Causation and Origin are x-acemq-causation and x-acemq-origin,
	// absent when "".
	Causation, Origin string
	// Headers are application headers, written as they are.
	Headers amqp.Table
}

// FullEnvelope is the envelope the internal/perf benchmarks send with
// every message when they carry one: every field set and two application
// headers. newFullEnvelope in the tests builds acemq's from it.
var FullEnvelope = Envelope{
	Type:        "order.created",
	Version:     2,
	Correlation: "corr-3b2f6c1d-8e4a-4f7b-9c0d-1a2b3c4d5e6f",
	Causation:   "cause-9d8c7b6a-5f4e-4d3c-2b1a-0f9e8d7c6b5a",
	Origin:      "perf@bench",
	Headers:     amqp.Table{"tenant": "acme", "priority": int32(5)},
}

// NewID is a message id as the contract makes them: a fresh UUID.
func NewID() string { return uuid.NewString() }

// EnvelopeTable writes an Envelope's header table, message after message.
// Its fixed values are boxed once, as a table literal of constants would
// hold them, so that a table costs what a hand-written one costs: the map,
// and the values that change (the id, the first-seen time, and the type
// when it is the routing key).
type EnvelopeTable struct {
	typ, version, corr, cause, origin any // nil: absent, or derived per message
	app                               amqp.Table
}

// Prepare returns the writer of e's tables.
func (e Envelope) Prepare() *EnvelopeTable {
	t := &EnvelopeTable{version: max(e.Version, 1), app: e.Headers}
	if e.Type != "" {
		t.typ = e.Type
	}
	if e.Correlation != "" {
		t.corr = e.Correlation
	}
	if e.Causation != "" {
		t.cause = e.Causation
	}
	if e.Origin != "" {
		t.origin = e.Origin
	}
	return t
}

// For is the header table of a message with id published with
// routingKey: the envelope's x-acemq-* headers, attempt 1 and first seen
// now, and its application headers.
func (t *EnvelopeTable) For(id, routingKey string) amqp.Table {
	return t.write(id, routingKey, t.corr, t.cause)
}

// write is For with the correlation and causation given (nil: the id, and
// none), as a reply takes them from its request's table.
func (t *EnvelopeTable) write(id, routingKey string, corr, cause any) amqp.Table {
	h := make(amqp.Table, 8+len(t.app))
	for k, v := range t.app {
		h[k] = v
	}
	h[wire.HeaderID] = id
	switch {
	case t.typ != nil:
		h[wire.HeaderType] = t.typ
	case routingKey != "":
		h[wire.HeaderType] = routingKey
	default:
		h[wire.HeaderType] = wire.DefaultType
	}
	h[wire.HeaderVersion] = t.version
	if corr == nil {
		corr = id
	}
	h[wire.HeaderCorrelation] = corr
	h[wire.HeaderAttempt] = int32(1)
	h[wire.HeaderFirstSeen] = time.Now().UnixMilli()
	if cause != nil {
		h[wire.HeaderCausation] = cause
	}
	if t.origin != nil {
		h[wire.HeaderOrigin] = t.origin
	}
	return h
}

// EnvelopeFields is an envelope read by hand: what a careful application
// using amqp091-go alone does with a delivery's headers to act on the
// contract (an idempotency key, the attempt for its retries, the age), the
// reading counterpart of EnvelopeTable. It takes the canonical types acemq
// and the family write (strings, int32 counters, int64 epoch
// milliseconds) and nothing else: no other widths, no []byte strings, no
// defaults, no copy of the application headers. acemq.ReadEnvelope does
// all of that; this is the least a consumer of the contract does.
type EnvelopeFields struct {
	ID, Type, Correlation, Causation, Origin string
	Version, Attempt                         int32
	FirstSeen                                int64
}

// Read fills e from a delivery's headers, one lookup a field.
func (e *EnvelopeFields) Read(h amqp.Table) {
	e.ID, _ = h[wire.HeaderID].(string)
	e.Type, _ = h[wire.HeaderType].(string)
	e.Correlation, _ = h[wire.HeaderCorrelation].(string)
	e.Causation, _ = h[wire.HeaderCausation].(string)
	e.Origin, _ = h[wire.HeaderOrigin].(string)
	e.Version, _ = h[wire.HeaderVersion].(int32)
	e.Attempt, _ = h[wire.HeaderAttempt].(int32)
	e.FirstSeen, _ = h[wire.HeaderFirstSeen].(int64)
}
