package acemq

import (
	"math"
	"reflect"
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
// method returns a modified copy, and the maps and slices it takes and hands
// out are copies (nested tables, arrays and byte slices among the header
// values included), so an envelope never shares storage the caller can
// change. The zero Envelope is valid as an argument to the publish functions
// and means "build one with the defaults".
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
	// Version is the payload schema version; below 1 is corrected to 1,
	// above 2147483647 (the wire's 32-bit integer) to 2147483647.
	Version int
	// CorrelationID groups a conversation. Default: the ID.
	CorrelationID string
	// CausationID is the id of the message that caused this one.
	CausationID string
	// Attempt counts deliveries, the first included; below 1 is corrected
	// to 1, above 2147483647 to 2147483647.
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
	// the zero-based step this message is for, and the run's id. Step names
	// are trimmed and empty ones dropped; a name containing a comma becomes
	// two steps, because the route travels as one comma-joined header.
	// Without steps there is no route: RoutePosition and RouteID are then
	// ignored (0 and ""), as they would be after a trip over the wire.
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
	e.version = counter(e.version, 1)
	e.attempt = counter(e.attempt, 1)
	if e.firstSeen.IsZero() {
		e.firstSeen = time.Now()
	}
	e.firstSeen = msTime(e.firstSeen)
	if len(e.route) == 0 {
		e.route, e.routePosition, e.routeID = nil, 0, ""
	}
	e.routePosition = counter(e.routePosition, 0)
}

// counter clamps n to [least, MaxInt32]: counters travel as signed 32-bit
// AMQP integers, and a value below the least is corrected, not refused.
func counter(n, least int) int {
	switch {
	case n < least:
		return least
	case n > math.MaxInt32:
		return math.MaxInt32
	}
	return n
}

// msTime is t truncated to the millisecond the wire carries, in UTC and
// without a monotonic reading, so that an envelope read back from its own
// headers has the same FirstSeen.
func msTime(t time.Time) time.Time { return time.UnixMilli(t.UnixMilli()).UTC() }

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

// FirstSeen is when the message was first published, in UTC to the
// millisecond. For a message read without a usable first-seen header it is
// the moment it was read (see FirstSeenKnown and Age); a republish writes
// that moment, so later hops measure from it.
func (e Envelope) FirstSeen() time.Time { return e.firstSeen }

// FirstSeenKnown reports whether the first-seen time came with the message
// (or was set when building), rather than being the moment of reading.
func (e Envelope) FirstSeenKnown() bool { return !e.ageUnknown }

// Age is how long ago the message was first published, computed now (it is
// never stored). ok is false when the first-seen time is unknown: the
// message arrived without a usable x-acemq-first-seen. An unknown age is
// young enough and never triggers an age limit. A first-seen time in the
// future (a sender's clock ahead of ours) gives an age of 0.
func (e Envelope) Age() (age time.Duration, ok bool) {
	if e.ageUnknown || e.firstSeen.IsZero() {
		return 0, false
	}
	return max(time.Since(e.firstSeen), 0), true
}

// Origin is the sender, conventionally service@host, or "".
func (e Envelope) Origin() string { return e.origin }

// Error is the reason the library set this copy aside, or "".
func (e Envelope) Error() string { return e.err }

// Claim is the application-owned location of an offloaded payload, or "".
func (e Envelope) Claim() string { return e.claim }

// Route returns a copy of the declared route's step names (nil when none).
// A republish of the envelope carries the route, its position and run id.
func (e Envelope) Route() []string { return slices.Clone(e.route) }

// RoutePosition is the zero-based position of the step this message is for.
func (e Envelope) RoutePosition() int { return e.routePosition }

// RouteID is the route run's id, or "".
func (e Envelope) RouteID() string { return e.routeID }

// Headers returns a copy of the application headers (never nil): changing
// it, or a table, array or byte slice inside it, does not change e.
// Reserved x-acemq-* headers are never among them.
func (e Envelope) Headers() map[string]any {
	if len(e.headers) == 0 {
		return map[string]any{}
	}
	return copyHeaders(e.headers)
}

// Header returns one application header (a copy, when it is a table, an
// array or a byte slice).
func (e Envelope) Header(name string) (any, bool) {
	v, ok := e.headers[name]
	return cloneValue(v), ok
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

// WithVersion returns a copy with the version replaced (below 1 becomes 1,
// above 2147483647 becomes 2147483647).
func (e Envelope) WithVersion(v int) Envelope {
	e = e.orDefault()
	e.version = counter(v, 1)
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

// WithAttempt returns a copy with the attempt replaced (below 1 becomes 1,
// above 2147483647 becomes 2147483647).
func (e Envelope) WithAttempt(n int) Envelope {
	e = e.orDefault()
	e.attempt = counter(n, 1)
	return e
}

// WithFirstSeen returns a copy with the first-seen time replaced; the age
// becomes known.
func (e Envelope) WithFirstSeen(t time.Time) Envelope {
	e = e.orDefault()
	if t.IsZero() {
		t = time.Now()
	}
	e.firstSeen = msTime(t)
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
// position of the step the message is for (negative becomes 0), and the run
// id. Steps are cleaned as Fields.Route describes; no steps means no route,
// and position and run id are then dropped too.
func (e Envelope) WithRoute(steps []string, position int, runID string) Envelope {
	e = e.orDefault()
	e.route = cleanRoute(steps)
	e.routePosition = counter(position, 0)
	e.routeID = runID
	if len(e.route) == 0 {
		e.route, e.routePosition, e.routeID = nil, 0, ""
	}
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
	for k, v := range e.headers {
		h[k] = v // e's values are never mutated, so sharing them is safe
	}
	h[name] = cloneValue(value)
	e.headers = h
	return e, nil
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
	if len(name) < len(p) || name[0]|0x20 != 'x' {
		return false // the common case for an application header: cheap
	}
	return name[:len(p)] == p || strings.EqualFold(name[:len(p)], p)
}

// ReservedHeaderError reports application headers that use reserved names
// (see IsReserved). Nothing was built or sent: rename the headers.
type ReservedHeaderError struct {
	Names []string // every offending name, sorted
}

// Error names every offending header, for example "these header names
// belong to AceMQ and cannot be set by hand: x-acemq-id".
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

// copyHeaders returns a deep copy of h (nil when h is empty): nested tables,
// arrays and byte slices are copied too, scalars are shared (they are
// immutable).
func copyHeaders(h map[string]any) map[string]any {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]any, len(h))
	for k, v := range h {
		out[k] = cloneValue(v)
	}
	return out
}

// cloneValue copies the mutable parts of a header value: tables
// (map[string]any and other maps), arrays ([]any and other slices) and byte
// slices, recursively. Anything else is returned as it is; pointers are
// shared.
func cloneValue(v any) any {
	switch x := v.(type) {
	case nil, string, bool, int, int8, int16, int32, int64, uint, uint8, uint16, uint32, uint64,
		float32, float64, time.Time:
		return v
	case []byte:
		if x == nil {
			return x
		}
		return append([]byte{}, x...)
	case map[string]any:
		if x == nil {
			return x
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			out[k] = cloneValue(e)
		}
		return out
	case []any:
		if x == nil {
			return x
		}
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = cloneValue(e)
		}
		return out
	}
	return cloneReflect(reflect.ValueOf(v)).Interface()
}

// cloneReflect copies maps and slices of other types (an amqp091 Table, say).
func cloneReflect(rv reflect.Value) reflect.Value {
	switch rv.Kind() {
	case reflect.Map:
		if rv.IsNil() {
			return rv
		}
		out := reflect.MakeMapWithSize(rv.Type(), rv.Len())
		it := rv.MapRange()
		for it.Next() {
			out.SetMapIndex(it.Key(), cloneElem(it.Value(), rv.Type().Elem()))
		}
		return out
	case reflect.Slice:
		if rv.IsNil() {
			return rv
		}
		out := reflect.MakeSlice(rv.Type(), rv.Len(), rv.Len())
		for i := range rv.Len() {
			out.Index(i).Set(cloneElem(rv.Index(i), rv.Type().Elem()))
		}
		return out
	}
	return rv
}

func cloneElem(v reflect.Value, t reflect.Type) reflect.Value {
	if t.Kind() == reflect.Interface {
		if v.IsNil() {
			return v
		}
		return reflect.ValueOf(cloneValue(v.Interface()))
	}
	return cloneReflect(v)
}

// cleanRoute trims the step names, splits any that contain a comma (the
// route travels comma-joined) and drops empty ones. It returns nil when no
// step is left.
func cleanRoute(steps []string) []string {
	n := 0
	for _, s := range steps {
		n += strings.Count(s, ",") + 1
	}
	out := make([]string, 0, n)
	for _, s := range steps {
		for part := range strings.SplitSeq(s, ",") {
			if part = strings.TrimSpace(part); part != "" {
				out = append(out, part)
			}
		}
	}
	if len(out) == 0 {
		return nil
	}
	return out
}
