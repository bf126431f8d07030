package acemq

import (
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/google/uuid"
)

// Envelope describes a message: what it is, what caused it, which attempt
// this is, who sent it and when it was first published. The library writes
// it into reserved x-acemq-* headers on publish and reads it back on
// delivery; applications never touch those headers.
//
// An Envelope is a value. Once built no field changes in place: Change and
// Derive return modified copies, and the maps and slices it takes and hands
// out are copies (nested tables, arrays and byte slices among the header
// values included), so an envelope never shares storage the caller can
// change. The zero Envelope is valid as an argument to the publish functions
// and means "build one with the defaults".
//
// Its wire form is docs/wire.md §2–3; its JSON form, MarshalJSON.
type Envelope struct {
	id            string
	typ           string
	typed         bool // the type was set, not the routing key's fallback
	version       int
	correlationID string
	causationID   string
	attempt       int
	firstSeen     time.Time
	ageUnknown    bool
	origin        string
	reason        string
	claim         string
	route         []string
	routePosition int
	routeID       string
	headers       headerList     // application headers, by name; never mutated after build
	reserved      map[string]any // unknown x-acemq-* headers as received; never mutated
}

// Fields holds the settable fields of an envelope. Build an Envelope from it
// with NewEnvelope, which applies the defaults; read a copy back with
// Envelope.Fields; change some of them with Envelope.Change.
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
	// Reason is why the library set a copy aside (dead letter, parked): the
	// x-acemq-error header.
	Reason string
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
	// Headers are application headers. Names beginning x-acemq- are refused
	// (*ReservedHeaderError), and so are values AMQP cannot carry
	// (*HeaderValueError); see docs/envelope.md for the accepted Go types.
	// Go int and uint values are stored as int64.
	Headers map[string]any
}

// NewEnvelope builds an envelope from f, applying the defaults: a fresh UUID
// id, correlation = id, attempt and version at least 1, first seen now. It
// fails with a *ReservedHeaderError when f.Headers names a reserved header,
// and with a *HeaderValueError when a header value cannot travel in an AMQP
// field table.
func NewEnvelope(f Fields) (e Envelope, err error) {
	// Built in place, in the result: an Envelope is large.
	if e.headers, err = checkHeaders(f.Headers); err != nil {
		return Envelope{}, err
	}
	e.id = f.ID
	e.typ, e.typed = f.Type, f.Type != ""
	e.version = f.Version
	e.correlationID = f.CorrelationID
	e.causationID = f.CausationID
	e.attempt = f.Attempt
	e.firstSeen = f.FirstSeen
	e.origin = f.Origin
	e.reason = f.Reason
	e.claim = f.Claim
	if len(f.Route) > 0 {
		e.route = cleanRoute(f.Route)
		e.routePosition = f.RoutePosition
		e.routeID = f.RouteID
	}
	e.applyDefaults()
	return e, nil
}

// MustEnvelope is NewEnvelope for fields known to be valid; it panics on an
// invalid header.
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
// Envelope did not). Through a pointer: a method of the value would copy
// the whole Envelope to read its id.
func (e *Envelope) built() bool { return e.id != "" }

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
// the moment it was read (Age then reports the age unknown); a republish
// writes that moment, so later hops measure from it.
func (e Envelope) FirstSeen() time.Time { return e.firstSeen }

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

// Reason is why the library set this copy aside (the x-acemq-error
// header), or "".
func (e Envelope) Reason() string { return e.reason }

// Claim is the application-owned location of an offloaded payload, or "".
func (e Envelope) Claim() string { return e.claim }

// Headers returns a copy of the application headers (never nil): changing
// it, or a table, array or byte slice inside it, does not change e.
// Reserved x-acemq-* headers are never among them.
func (e Envelope) Headers() map[string]any {
	out := make(map[string]any, len(e.headers))
	for _, h := range e.headers {
		out[h.name] = cloneValue(h.value)
	}
	return out
}

// Header returns one application header (a copy, when it is a table, an
// array or a byte slice).
func (e Envelope) Header(name string) (any, bool) {
	v, ok := e.headers.get(name)
	return cloneValue(v), ok
}

// Fields returns a copy of e's fields. Unknown reserved headers carried by e
// are not part of Fields and are not carried into an envelope built from
// them with NewEnvelope; Change keeps them.
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
		Reason:        e.reason,
		Claim:         e.claim,
		Route:         slices.Clone(e.route),
		RoutePosition: e.routePosition,
		RouteID:       e.routeID,
		Headers:       e.Headers(),
	}
}

// Change returns a copy of e whose fields are those f leaves in the Fields
// it is given (e's own, from Fields). The defaults are applied again (an
// emptied id becomes a fresh UUID, an emptied correlation the id, and so
// on), and the copy keeps what Fields does not hold: the unknown reserved
// headers e was read with, and whether its first-seen time is known (unless
// f changes FirstSeen). It fails as NewEnvelope does when f leaves headers
// that are invalid. On the zero Envelope, f receives zero Fields (with an
// empty Headers map), and the result is NewEnvelope's.
//
//	next, err := m.Envelope.Change(func(f *acemq.Fields) {
//		f.Attempt = 1
//		f.Headers["tenant"] = "acme"
//	})
func (e Envelope) Change(f func(*Fields)) (Envelope, error) {
	if !e.built() {
		fs := Fields{Headers: map[string]any{}}
		f(&fs)
		return NewEnvelope(fs)
	}
	fs := e.Fields()
	f(&fs)
	n, err := NewEnvelope(fs)
	if err != nil {
		return e, err
	}
	n.reserved = e.reserved
	if e.ageUnknown && fs.FirstSeen.Equal(e.firstSeen) {
		n.ageUnknown = true
	}
	if !e.typed && fs.Type == e.typ {
		n.typed = false // still the routing key's fallback
	}
	return n, nil
}

// String describes the envelope in one line for logs, for example
//
//	envelope 6f1c…-… type=order.placed version=1 attempt=2 correlation=… origin=orders@host-1
//
// with causation, origin, claim, reason, route, the first-seen time (when it
// is known) and the number of application headers when there are any. The
// zero Envelope is "envelope (none)".
func (e Envelope) String() string {
	if !e.built() {
		return "envelope (none)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "envelope %s type=%s version=%d attempt=%d correlation=%s", e.id, e.typ, e.version, e.attempt, e.correlationID)
	for _, kv := range [...]struct{ k, v string }{
		{"causation", e.causationID}, {"origin", e.origin}, {"claim", e.claim}, {"reason", strconv.Quote(e.reason)},
	} {
		if kv.v != "" && kv.v != `""` {
			fmt.Fprintf(&b, " %s=%s", kv.k, kv.v)
		}
	}
	if len(e.route) > 0 {
		fmt.Fprintf(&b, " route=%s@%d", strings.Join(e.route, ","), e.routePosition)
	}
	if !e.ageUnknown {
		fmt.Fprintf(&b, " first-seen=%s", e.firstSeen.Format(time.RFC3339Nano))
	}
	if n := len(e.headers); n > 0 {
		fmt.Fprintf(&b, " headers=%d", n)
	}
	return b.String()
}

// withReason returns a copy with the reason replaced.
func (e Envelope) withReason(reason string) Envelope { e = e.orDefault(); e.reason = reason; return e }

// next returns the envelope of the next attempt: a copy with attempt + 1.
func (e Envelope) next() Envelope {
	e = e.orDefault()
	e.attempt = counter(e.attempt+1, 1)
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

// ReservedHeaderError reports application headers that use reserved names:
// any name beginning "x-acemq-", in any letter case, belongs to the
// library. Nothing was built or sent: rename the headers.
type ReservedHeaderError struct {
	Names []string // every offending name, sorted
}

// Error names every offending header, for example "these header names
// belong to AceMQ and cannot be set by hand: x-acemq-id".
func (e *ReservedHeaderError) Error() string {
	return "these header names belong to AceMQ and cannot be set by hand: " + strings.Join(e.Names, ", ")
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
