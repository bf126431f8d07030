package acemq

import (
	"maps"
	"slices"
	"sort"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Envelope describes a message: what it is, what caused it, which attempt
// this is, who sent it and when it was first published. The library writes
// it into reserved x-acemq-* headers on publish and reads it back on
// delivery; applications never touch those headers.
//
// An Envelope is a value. Once built no field changes in place: every With…
// method returns a modified copy, and the maps and slices it hands out are
// copies, so a copy never shares storage the caller can change. The zero
// Envelope is valid as an argument to the publish functions and means "build
// one with the defaults".
type Envelope struct {
	id            string
	typ           string
	version       int
	correlationID string
	causationID   string
	attempt       int
	firstSeen     time.Time
	ageUnknown    bool
	origin        string
	err           string
	claim         string
	route         []string
	routePosition int
	routeID       string
	headers       map[string]any // application headers; never mutated after build
	reserved      map[string]any // unknown x-acemq-* headers as received; never mutated
}

// Fields holds the settable fields of an envelope. Build an Envelope from it
// with NewEnvelope, which applies the defaults; read a copy back with
// Envelope.Fields.
type Fields struct {
	// ID is the message id and idempotency key. Default: a fresh UUID v4.
	ID string
	// Type names the payload; empty falls back to the routing key when the
	// headers are written, and to "message" when that is empty too.
	Type string
	// Version is the payload schema version; below 1 is corrected to 1.
	Version int
	// CorrelationID groups a conversation. Default: the ID.
	CorrelationID string
	// CausationID is the id of the message that caused this one.
	CausationID string
	// Attempt counts deliveries, the first included; below 1 is corrected.
	Attempt int
	// FirstSeen is when the message was first published. Default: now.
	FirstSeen time.Time
	// Origin is the sender, conventionally service@host. Empty is stamped
	// with the connection's origin when an application publishes.
	Origin string
	// Error is the reason the library set a copy aside (dead letter, parked).
	Error string
	// Claim is an application-owned location of an offloaded payload, for
	// operators. It is not the claim-check signal.
	Claim string
	// Route, RoutePosition and RouteID are a declared route: its step names,
	// the zero-based step this message is for, and the run's id.
	Route         []string
	RoutePosition int
	RouteID       string
	// Headers are application headers. Names beginning x-acemq- are refused.
	Headers map[string]any
}

// NewEnvelope builds an envelope from f, applying the defaults: a fresh UUID
// id, correlation = id, attempt and version at least 1, first seen now. It
// fails with a *ReservedHeaderError when f.Headers names a reserved header.
func NewEnvelope(f Fields) (Envelope, error) {
	if err := checkHeaders(f.Headers); err != nil {
		return Envelope{}, err
	}
	e := Envelope{
		id:            f.ID,
		typ:           f.Type,
		version:       f.Version,
		correlationID: f.CorrelationID,
		causationID:   f.CausationID,
		attempt:       f.Attempt,
		firstSeen:     f.FirstSeen,
		origin:        f.Origin,
		err:           f.Error,
		claim:         f.Claim,
		route:         cleanRoute(f.Route),
		routePosition: f.RoutePosition,
		routeID:       f.RouteID,
		headers:       copyHeaders(f.Headers),
	}
	e.applyDefaults()
	return e, nil
}

// MustEnvelope is NewEnvelope for fields known to be valid; it panics on a
// reserved header name.
func MustEnvelope(f Fields) Envelope {
	e, err := NewEnvelope(f)
	if err != nil {
		panic(err)
	}
	return e
}

func (e *Envelope) applyDefaults() {
	if e.id == "" {
		e.id = uuid.NewString()
	}
	if e.correlationID == "" {
		e.correlationID = e.id
	}
	if e.version < 1 {
		e.version = 1
	}
	if e.attempt < 1 {
		e.attempt = 1
	}
	if e.firstSeen.IsZero() {
		e.firstSeen = time.Now()
	}
	e.firstSeen = e.firstSeen.Truncate(time.Millisecond)
	if e.routePosition < 0 {
		e.routePosition = 0
	}
}

// built reports whether e came from NewEnvelope or a reader (the zero
// Envelope did not).
func (e Envelope) built() bool { return e.id != "" }

// orDefault returns e, or a freshly built envelope when e is the zero value.
func (e Envelope) orDefault() Envelope {
	if e.built() {
		return e
	}
	var n Envelope
	n.applyDefaults()
	return n
}

// ID is the message id (also the AMQP message-id). It never changes on
// retry, dead-letter, park or replay.
func (e Envelope) ID() string { return e.id }

// Type is the payload type as set; empty means it falls back to the routing
// key when the headers are written.
func (e Envelope) Type() string { return e.typ }

// Version is the payload schema version, at least 1.
func (e Envelope) Version() int { return e.version }

// CorrelationID is the conversation id; it defaults to the ID.
func (e Envelope) CorrelationID() string { return e.correlationID }

// CausationID is the id of the message that caused this one, or "".
func (e Envelope) CausationID() string { return e.causationID }

// Attempt is the delivery attempt, from 1. It rides on the message, not on
// the broker's redelivered flag.
func (e Envelope) Attempt() int { return e.attempt }

// FirstSeen is when the message was first published. For a message read
// without a first-seen header it is the moment it was read (see Age).
func (e Envelope) FirstSeen() time.Time { return e.firstSeen }

// FirstSeenKnown reports whether the first-seen time came with the message
// (or was set when building), rather than being the moment of reading.
func (e Envelope) FirstSeenKnown() bool { return !e.ageUnknown }

// Age is how long ago the message was first published. ok is false when
// the first-seen time is unknown; an unknown age never triggers an age limit.
func (e Envelope) Age() (age time.Duration, ok bool) {
	if e.ageUnknown || e.firstSeen.IsZero() {
		return 0, false
	}
	return time.Since(e.firstSeen), true
}

// Origin is the sender, conventionally service@host, or "".
func (e Envelope) Origin() string { return e.origin }

// Error is the reason the library set this copy aside, or "".
func (e Envelope) Error() string { return e.err }

// Claim is the application-owned location of an offloaded payload, or "".
func (e Envelope) Claim() string { return e.claim }

// Route returns a copy of the declared route's step names (nil when none).
func (e Envelope) Route() []string { return slices.Clone(e.route) }

// RoutePosition is the zero-based position of the step this message is for.
func (e Envelope) RoutePosition() int { return e.routePosition }

// RouteID is the route run's id, or "".
func (e Envelope) RouteID() string { return e.routeID }

// Headers returns a copy of the application headers (never nil). Reserved
// x-acemq-* headers are never among them.
func (e Envelope) Headers() map[string]any {
	if len(e.headers) == 0 {
		return map[string]any{}
	}
	return copyHeaders(e.headers)
}

// Header returns one application header.
func (e Envelope) Header(name string) (any, bool) {
	v, ok := e.headers[name]
	return v, ok
}

// Fields returns a copy of e's fields, for building a changed envelope with
// NewEnvelope. Unknown reserved headers carried by e are not part of Fields
// and are not carried into an envelope built from them.
func (e Envelope) Fields() Fields {
	return Fields{
		ID:            e.id,
		Type:          e.typ,
		Version:       e.version,
		CorrelationID: e.correlationID,
		CausationID:   e.causationID,
		Attempt:       e.attempt,
		FirstSeen:     e.firstSeen,
		Origin:        e.origin,
		Error:         e.err,
		Claim:         e.claim,
		Route:         slices.Clone(e.route),
		RoutePosition: e.routePosition,
		RouteID:       e.routeID,
		Headers:       e.Headers(),
	}
}

// WithID returns a copy with the id replaced.
func (e Envelope) WithID(id string) Envelope {
	e = e.orDefault()
	e.id = id
	if id == "" {
		e.id = uuid.NewString()
	}
	return e
}

// WithType returns a copy with the type replaced.
func (e Envelope) WithType(t string) Envelope { e = e.orDefault(); e.typ = t; return e }

// WithVersion returns a copy with the version replaced (below 1 becomes 1).
func (e Envelope) WithVersion(v int) Envelope {
	e = e.orDefault()
	e.version = max(v, 1)
	return e
}

// WithCorrelationID returns a copy with the correlation id replaced; empty
// falls back to the id.
func (e Envelope) WithCorrelationID(id string) Envelope {
	e = e.orDefault()
	e.correlationID = id
	if id == "" {
		e.correlationID = e.id
	}
	return e
}

// WithCausationID returns a copy with the causation id replaced.
func (e Envelope) WithCausationID(id string) Envelope {
	e = e.orDefault()
	e.causationID = id
	return e
}

// WithAttempt returns a copy with the attempt replaced (below 1 becomes 1).
func (e Envelope) WithAttempt(n int) Envelope {
	e = e.orDefault()
	e.attempt = max(n, 1)
	return e
}

// WithFirstSeen returns a copy with the first-seen time replaced; the age
// becomes known.
func (e Envelope) WithFirstSeen(t time.Time) Envelope {
	e = e.orDefault()
	if t.IsZero() {
		t = time.Now()
	}
	e.firstSeen = t.Truncate(time.Millisecond)
	e.ageUnknown = false
	return e
}

// WithOrigin returns a copy with the origin replaced.
func (e Envelope) WithOrigin(o string) Envelope { e = e.orDefault(); e.origin = o; return e }

// WithError returns a copy with the error reason replaced.
func (e Envelope) WithError(reason string) Envelope { e = e.orDefault(); e.err = reason; return e }

// WithClaim returns a copy with the claim location replaced.
func (e Envelope) WithClaim(c string) Envelope { e = e.orDefault(); e.claim = c; return e }

// WithRoute returns a copy carrying a declared route: its steps, the
// position of the step the message is for, and the run id.
func (e Envelope) WithRoute(steps []string, position int, runID string) Envelope {
	e = e.orDefault()
	e.route = cleanRoute(steps)
	e.routePosition = max(position, 0)
	e.routeID = runID
	return e
}

// WithHeaders returns a copy whose application headers are h (copied). A
// reserved name fails with a *ReservedHeaderError.
func (e Envelope) WithHeaders(h map[string]any) (Envelope, error) {
	if err := checkHeaders(h); err != nil {
		return e, err
	}
	e = e.orDefault()
	e.headers = copyHeaders(h)
	return e, nil
}

// WithHeader returns a copy with one application header set. A reserved
// name fails with a *ReservedHeaderError.
func (e Envelope) WithHeader(name string, value any) (Envelope, error) {
	if IsReserved(name) {
		return e, &ReservedHeaderError{Names: []string{name}}
	}
	e = e.orDefault()
	h := make(map[string]any, len(e.headers)+1)
	maps.Copy(h, e.headers)
	h[name] = value
	e.headers = h
	return e, nil
}

// withoutHeader returns a copy with one application header removed.
func (e Envelope) withoutHeader(name string) Envelope {
	if _, ok := e.headers[name]; !ok {
		return e
	}
	h := copyHeaders(e.headers)
	delete(h, name)
	e.headers = h
	return e
}

// Derive returns the envelope of a new message caused by e: a fresh id and
// first-seen, the same correlation, causation = e's id, attempt 1, and no
// type, headers, route or error of e's.
func (e Envelope) Derive() Envelope {
	n := Envelope{correlationID: e.correlationID, causationID: e.id}
	n.applyDefaults()
	return n
}

// Next returns the envelope of the next attempt: a copy with Attempt + 1.
func (e Envelope) Next() Envelope { return e.WithAttempt(e.attempt + 1) }

// IsReserved reports whether name belongs to the library's reserved
// namespace: any name beginning "x-acemq-", in any letter case.
func IsReserved(name string) bool {
	const p = "x-acemq-"
	return len(name) >= len(p) && strings.EqualFold(name[:len(p)], p)
}

// ReservedHeaderError reports application headers that use reserved names.
type ReservedHeaderError struct {
	Names []string // sorted
}

func (e *ReservedHeaderError) Error() string {
	return "these header names belong to AceMQ and cannot be set by hand: " + strings.Join(e.Names, ", ")
}

func checkHeaders(h map[string]any) error {
	var bad []string
	for k := range h {
		if IsReserved(k) {
			bad = append(bad, k)
		}
	}
	if bad == nil {
		return nil
	}
	sort.Strings(bad)
	return &ReservedHeaderError{Names: bad}
}

func copyHeaders(h map[string]any) map[string]any {
	if len(h) == 0 {
		return nil
	}
	return maps.Clone(h)
}

func cleanRoute(steps []string) []string {
	var out []string
	for _, s := range steps {
		if s = strings.TrimSpace(s); s != "" {
			out = append(out, s)
		}
	}
	return out
}
