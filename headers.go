package acemq

import (
	"strings"
	"time"

	"github.com/acemq/acemq/internal/wire"
	"github.com/google/uuid"
)

// Reserved envelope headers (WIRE.md §3.1).
const (
	HeaderID            = "x-acemq-id"
	HeaderType          = "x-acemq-type"
	HeaderVersion       = "x-acemq-version"
	HeaderCorrelation   = "x-acemq-correlation"
	HeaderCausation     = "x-acemq-causation"
	HeaderAttempt       = "x-acemq-attempt"
	HeaderFirstSeen     = "x-acemq-first-seen"
	HeaderOrigin        = "x-acemq-origin"
	HeaderError         = "x-acemq-error"
	HeaderClaim         = "x-acemq-claim"
	HeaderRoute         = "x-acemq-route"
	HeaderRoutePosition = "x-acemq-route-position"
	HeaderRouteID       = "x-acemq-route-id"
)

// Shared, unreserved headers (WIRE.md §3.2). Handlers see them and every
// republish carries them.
const (
	HeaderReplyTo      = "acemq-reply-to"
	HeaderReplyError   = "acemq-error"
	HeaderRoutingSlip  = "acemq-routing-slip"
	HeaderReplayedFrom = "acemq-replayed-from"
	HeaderReplayedAt   = "acemq-replayed-at"
	HeaderReplayCount  = "acemq-replay-count"
)

// DefaultType is the type written when neither the envelope nor the routing
// key gives one.
const DefaultType = "message"

// ReadEnvelope builds an envelope from a delivery's headers, routing key and
// AMQP message-id, forgivingly: a missing or unreadable value takes its
// default, strings may arrive as bytes, integers in any width, as
// whole-number floats or as decimal strings. A missing id falls back to the
// message-id, then to a fresh UUID; a missing type to the routing key, then
// to "message"; a missing first-seen makes the age unknown.
//
// Every x-acemq-* header is kept out of the application headers. Unknown
// ones are kept aside, unchanged, and written back by AppendHeaders, so a
// republish of the same message carries them through.
func ReadEnvelope(headers map[string]any, routingKey, messageID string) Envelope {
	var e Envelope
	var firstSeenOK bool
	appCount := 0
	for k := range headers {
		if !IsReserved(k) {
			appCount++
		}
	}
	if appCount > 0 {
		e.headers = make(map[string]any, appCount)
	}
	for k, v := range headers {
		if !IsReserved(k) {
			e.headers[k] = v
			continue
		}
		switch k {
		case HeaderID:
			e.id, _ = wire.String(v)
		case HeaderType:
			e.typ, _ = wire.String(v)
		case HeaderVersion:
			n, _ := wire.Int(v)
			e.version = clampInt(n)
		case HeaderCorrelation:
			e.correlationID, _ = wire.String(v)
		case HeaderCausation:
			e.causationID, _ = wire.String(v)
		case HeaderAttempt:
			n, _ := wire.Int(v)
			e.attempt = clampInt(n)
		case HeaderFirstSeen:
			if ms, ok := wire.Int(v); ok {
				e.firstSeen = time.UnixMilli(ms)
				firstSeenOK = true
			}
		case HeaderOrigin:
			e.origin, _ = wire.String(v)
		case HeaderError:
			e.err, _ = wire.String(v)
		case HeaderClaim:
			e.claim, _ = wire.String(v)
		case HeaderRoute:
			if s, ok := wire.String(v); ok {
				e.route = cleanRoute(strings.Split(s, ","))
			}
		case HeaderRoutePosition:
			n, _ := wire.Int(v)
			e.routePosition = clampInt(n)
		case HeaderRouteID:
			e.routeID, _ = wire.String(v)
		default:
			if e.reserved == nil {
				e.reserved = make(map[string]any, 2)
			}
			e.reserved[k] = v
		}
	}
	if e.id == "" {
		e.id = messageID
		if e.id == "" {
			e.id = uuid.NewString()
		}
	}
	if e.typ == "" {
		e.typ = routingKey
		if e.typ == "" {
			e.typ = DefaultType
		}
	}
	if !firstSeenOK {
		e.ageUnknown = true
		e.firstSeen = time.Now().Truncate(time.Millisecond)
	}
	e.applyDefaults()
	return e
}

func clampInt(n int64) int {
	if n > 1<<31-1 || n < -(1<<31) {
		return 0
	}
	return int(n)
}

// AppendHeaders writes the envelope's headers into dst (allocating it when
// nil) and returns it: the reserved x-acemq-* headers, the application
// headers, and any unknown reserved headers the envelope was read with.
// Empty values are absent; x-acemq-route-position is written whenever there
// is a route; first-seen is integer epoch milliseconds; an empty type falls
// back to routingKey, then to "message".
func (e Envelope) AppendHeaders(dst map[string]any, routingKey string) map[string]any {
	e = e.orDefault()
	if dst == nil {
		dst = make(map[string]any, 8+len(e.headers)+len(e.reserved))
	}
	for k, v := range e.headers {
		dst[k] = v
	}
	for k, v := range e.reserved {
		dst[k] = v
	}
	typ := e.typ
	if typ == "" {
		typ = routingKey
		if typ == "" {
			typ = DefaultType
		}
	}
	dst[HeaderID] = e.id
	dst[HeaderType] = typ
	dst[HeaderVersion] = int32(e.version)
	dst[HeaderCorrelation] = e.correlationID
	dst[HeaderAttempt] = int32(e.attempt)
	dst[HeaderFirstSeen] = e.firstSeen.UnixMilli()
	if e.causationID != "" {
		dst[HeaderCausation] = e.causationID
	}
	if e.origin != "" {
		dst[HeaderOrigin] = e.origin
	}
	if e.err != "" {
		dst[HeaderError] = e.err
	}
	if e.claim != "" {
		dst[HeaderClaim] = e.claim
	}
	if len(e.route) > 0 {
		dst[HeaderRoute] = strings.Join(e.route, ",")
		dst[HeaderRoutePosition] = int32(e.routePosition)
		if e.routeID != "" {
			dst[HeaderRouteID] = e.routeID
		}
	}
	return dst
}

// WireType is the x-acemq-type value AppendHeaders would write for
// routingKey.
func (e Envelope) WireType(routingKey string) string {
	switch {
	case e.typ != "":
		return e.typ
	case routingKey != "":
		return routingKey
	}
	return DefaultType
}

// UnknownReserved returns a copy of the x-acemq-* headers the envelope was
// read with that this version does not know. They are carried through on
// every republish of the same message and never handed to handlers.
func (e Envelope) UnknownReserved() map[string]any { return copyHeaders(e.reserved) }

// withoutUnknown returns a copy that carries no unknown reserved headers,
// for a new message derived from a delivered one.
func (e Envelope) withoutUnknown() Envelope { e.reserved = nil; return e }
