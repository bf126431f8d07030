package acemq

import (
	"math"
	"strings"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
	"github.com/google/uuid"
)

// ReadEnvelope builds an envelope from a delivery's headers, routing key and
// AMQP message-id. It never fails: a message that arrived is delivered, not
// refused for a malformed envelope. A missing or unreadable value takes its
// default; strings may arrive as []byte (UTF-8; invalid UTF-8 is
// unreadable); integers in any width, signed or unsigned, as whole-number
// floats or as decimal strings; an empty string is absent. A missing id
// falls back to the message-id, then to a fresh UUID; a missing type to the
// routing key, then to "message"; correlation to the id; version and
// attempt below 1 to 1; a missing, unreadable or non-positive first-seen
// makes the age unknown (see Envelope.Age).
//
// Every x-acemq-* header (in any letter case) is kept out of the
// application headers. Known ones become fields; unknown ones are kept
// aside, value and type unchanged, and written back by AppendHeaders, so a
// republish of the same message carries them through. Every other header,
// broker-written ones such as x-death included, becomes an application
// header as received. The headers map is not retained: the envelope copies
// what it keeps, nested tables and arrays included.
func ReadEnvelope(headers map[string]any, routingKey, messageID string) Envelope {
	return readEnvelope(headers, routingKey, messageID, nil)
}

// deliveryEnvelope is ReadEnvelope of delivery d, converting the headers a
// driver handed up unconverted (driver.Delivery.HeaderValue) as it reads
// them.
func deliveryEnvelope(d *driver.Delivery) Envelope {
	return readEnvelope(d.Headers, d.RoutingKey, d.MessageID, d.HeaderValue)
}

// readEnvelope is ReadEnvelope; value, when not nil, converts each header
// value the envelope keeps (an application header or an unknown reserved
// one) before it is copied. The known headers need none: a nested table,
// array or decimal is unreadable in them either way.
func readEnvelope(headers map[string]any, routingKey, messageID string, value func(any) any) Envelope {
	var e Envelope
	var firstSeenOK bool
	// One pass over the map (iterating a map costs more than the switch
	// below): application headers are gathered on the stack and copied into
	// a list of the exact size afterwards.
	var stack [8]header
	app := stack[:0]
	for k, v := range headers {
		// The known headers are matched first, as written: most of a
		// delivery's headers are these, and they need no prefix test.
		switch k {
		case wire.HeaderID:
			e.id, _ = wire.String(v)
		case wire.HeaderType:
			e.typ, _ = wire.String(v)
			e.typed = e.typ != ""
		case wire.HeaderVersion:
			n, _ := wire.Int(v)
			e.version = clampInt(n)
		case wire.HeaderCorrelation:
			e.correlationID, _ = wire.String(v)
		case wire.HeaderCausation:
			e.causationID, _ = wire.String(v)
		case wire.HeaderAttempt:
			n, _ := wire.Int(v)
			e.attempt = clampInt(n)
		case wire.HeaderFirstSeen:
			// 0 and below are read as unknown: no AceMQ message was first
			// published in 1970, and acemq-go-amqp republishes a missing
			// first-seen as 0, which would otherwise look 56 years old.
			if ms, ok := wire.Int(v); ok && ms > 0 {
				e.firstSeen = time.UnixMilli(ms).UTC()
				firstSeenOK = true
			}
		case wire.HeaderOrigin:
			e.origin, _ = wire.String(v)
		case wire.HeaderError:
			e.reason, _ = wire.String(v)
		case wire.HeaderClaim:
			e.claim, _ = wire.String(v)
		case wire.HeaderRoute:
			if s, ok := wire.String(v); ok {
				e.route = cleanRoute([]string{s})
			}
		case wire.HeaderRoutePosition:
			n, _ := wire.Int(v)
			e.routePosition = clampInt(n)
		case wire.HeaderRouteID:
			e.routeID, _ = wire.String(v)
		default:
			if !wire.IsReserved(k) {
				if value != nil {
					v = value(v)
				}
				app = append(app, header{k, v})
				continue
			}
			// An unknown x-acemq-* header, or a known one in another
			// letter case: kept aside as received.
			if e.reserved == nil {
				e.reserved = make(map[string]any, 2)
			}
			if value != nil {
				v = value(v)
			}
			e.reserved[k] = cloneValue(v)
		}
	}
	if len(app) > 0 {
		e.headers = make(headerList, len(app))
		for i, h := range app {
			e.headers[i] = header{h.name, cloneValue(h.value)}
		}
		e.headers.sort()
	}
	if e.id == "" {
		e.id = messageID
		if e.id == "" {
			e.id = uuid.NewString()
		}
	}
	e.typ = e.wireType(routingKey)
	if !firstSeenOK {
		e.ageUnknown = true
		e.firstSeen = msTime(time.Now())
	}
	e.applyDefaults()
	return e
}

// clampInt reads a counter: a value outside the signed 32-bit range the
// wire carries counters in is unreadable, and 0 stands for that (every
// counter's default corrects it).
func clampInt(n int64) int {
	if n > math.MaxInt32 || n < math.MinInt32 {
		return 0
	}
	return int(n)
}

// AppendHeaders writes the envelope's headers into dst (allocating it when
// nil) and returns it: the reserved x-acemq-* headers, the application
// headers, and any unknown reserved headers the envelope was read with.
//
// Known fields are written in their canonical wire types whatever they were
// read from: strings as strings; version, attempt and route position as
// int32; first-seen as int64 epoch milliseconds. Empty values are absent
// (causation, origin, error, claim, route, route id); id, type, version,
// correlation, attempt and first-seen are always written;
// x-acemq-route-position is written whenever there is a route, 0 included.
// An empty type falls back to routingKey, then to "message". Application
// headers and unknown reserved headers are written as received; nested
// tables, arrays and byte slices are copies, so dst shares nothing mutable
// with e.
func (e Envelope) AppendHeaders(dst map[string]any, routingKey string) map[string]any {
	return e.appendHeaders(dst, routingKey, nil)
}

// appendHeaders is AppendHeaders, with the type, correlation, causation
// and origin values boxed through boxes when it is not nil (a publisher's,
// header_boxes.go).
func (e Envelope) appendHeaders(dst map[string]any, routingKey string, boxes *headerBoxes) map[string]any {
	e = e.orDefault()
	h, _ := e.writeHeaders(dst, routingKey, boxes)
	return h
}

// writeHeaders is appendHeaders of a built envelope (through a pointer:
// the publish path copies no Envelope) that also returns the encoded size
// of the table it wrote (docs/wire.md §3: what driver.Message.HeaderSize
// holds), or 0 when dst was not nil (its other entries are not counted) or
// a value is not a flat scalar (see wire.ScalarSize). It costs no walk of
// its own: the size is added up as the headers are written.
func (e *Envelope) writeHeaders(dst map[string]any, routingKey string, boxes *headerBoxes) (map[string]any, int) {
	var ts tableSize
	if dst == nil {
		dst = make(map[string]any, e.headerCount())
	} else {
		ts.fail()
	}
	for _, h := range e.headers {
		dst[h.name] = ts.value(h.name, h.value)
	}
	if len(e.reserved) > 0 { // ranging over a nil map still sets up an iterator
		for k, v := range e.reserved {
			dst[k] = cloneValue(v)
			ts.add(k, v)
		}
	}
	typ := e.wireType(routingKey)
	// One box for the id, shared by the correlation when it is the id (the
	// default): a box is an allocation.
	id := any(e.id)
	dst[wire.HeaderID] = id
	dst[wire.HeaderVersion] = int32(e.version)
	dst[wire.HeaderAttempt] = int32(e.attempt)
	dst[wire.HeaderFirstSeen] = e.firstSeen.UnixMilli()
	ts.addString(wire.HeaderID, e.id)
	ts.addString(wire.HeaderType, typ)
	ts.addString(wire.HeaderCorrelation, e.correlationID)
	ts.addFixed(wire.HeaderVersion, 4)
	ts.addFixed(wire.HeaderAttempt, 4)
	ts.addFixed(wire.HeaderFirstSeen, 8)
	if boxes == nil {
		dst[wire.HeaderType] = typ
		dst[wire.HeaderCorrelation] = e.correlationID
		if e.causationID != "" {
			dst[wire.HeaderCausation] = e.causationID
		}
		if e.origin != "" {
			dst[wire.HeaderOrigin] = e.origin
		}
	} else {
		dst[wire.HeaderType] = boxes.box(&boxes.typ, typ)
		if e.correlationID == e.id {
			// The default correlation is the id, new for every message.
			dst[wire.HeaderCorrelation] = id
		} else {
			dst[wire.HeaderCorrelation] = boxes.box(&boxes.correlation, e.correlationID)
		}
		if e.causationID != "" {
			dst[wire.HeaderCausation] = boxes.box(&boxes.causation, e.causationID)
		}
		if e.origin != "" {
			dst[wire.HeaderOrigin] = boxes.box(&boxes.origin, e.origin)
		}
	}
	if e.causationID != "" {
		ts.addString(wire.HeaderCausation, e.causationID)
	}
	if e.origin != "" {
		ts.addString(wire.HeaderOrigin, e.origin)
	}
	if e.reason != "" {
		dst[wire.HeaderError] = e.reason
		ts.addString(wire.HeaderError, e.reason)
	}
	if e.claim != "" {
		dst[wire.HeaderClaim] = e.claim
		ts.addString(wire.HeaderClaim, e.claim)
	}
	if len(e.route) > 0 {
		route := strings.Join(e.route, ",")
		dst[wire.HeaderRoute] = route
		dst[wire.HeaderRoutePosition] = int32(e.routePosition)
		ts.addString(wire.HeaderRoute, route)
		ts.addFixed(wire.HeaderRoutePosition, 4)
		if e.routeID != "" {
			dst[wire.HeaderRouteID] = e.routeID
			ts.addString(wire.HeaderRouteID, e.routeID)
		}
	}
	return dst, ts.size()
}

// headerCount is the number of headers AppendHeaders writes, so that a
// map made for them never grows.
func (e *Envelope) headerCount() int {
	n := 6 + len(e.headers) + len(e.reserved) // id, type, version, correlation, attempt, first-seen
	for _, s := range [...]string{e.causationID, e.origin, e.reason, e.claim} {
		if s != "" {
			n++
		}
	}
	if len(e.route) > 0 {
		n += 2
		if e.routeID != "" {
			n++
		}
	}
	return n
}

// wireType is the x-acemq-type value AppendHeaders writes for routingKey.
func (e *Envelope) wireType(routingKey string) string {
	switch {
	case e.typ != "":
		return e.typ
	case routingKey != "":
		return routingKey
	}
	return wire.DefaultType
}

// withoutUnknown returns a copy that carries no unknown reserved headers,
// for a new message derived from a delivered one.
func (e Envelope) withoutUnknown() Envelope { e.reserved = nil; return e }
