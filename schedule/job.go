package schedule

import (
	"errors"
	"fmt"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/wire"
)

// job is what a message between rungs says about its delivery.
type job struct {
	exchange    string
	routingKey  string
	due         time.Time
	contentType string
	typ         string // the scheduled message's own type, or ""
}

// defaultContentType is the content type of a delivery whose
// x-schedule-content-type is absent (docs/wire.md §5.7).
const defaultContentType = "application/json"

// errMalformed marks a message on the control queue without the headers a
// scheduled message carries.
var errMalformed = errors.New("not a scheduled message")

// readJob reads the x-schedule-* headers, forgiving as envelope reading is
// (docs/wire.md §2.6): strings as strings or bytes, the due time as any
// integer or a decimal string. The exchange may be empty (the default
// exchange); a missing exchange, routing key or due time is malformed.
func readJob(h map[string]any) (job, error) {
	var j job
	var ok bool
	if j.exchange, ok = text(h[HeaderExchange]); !ok {
		return j, fmt.Errorf("%w: %s is missing or not a string", errMalformed, HeaderExchange)
	}
	if j.routingKey, ok = text(h[HeaderRoutingKey]); !ok {
		return j, fmt.Errorf("%w: %s is missing or not a string", errMalformed, HeaderRoutingKey)
	}
	ms, ok := wire.Int(h[HeaderDueAt])
	if !ok {
		return j, fmt.Errorf("%w: %s is missing or not an integer (epoch milliseconds)", errMalformed, HeaderDueAt)
	}
	j.due = time.UnixMilli(ms)
	j.contentType, _ = wire.String(h[HeaderContentType])
	if j.contentType == "" {
		j.contentType = defaultContentType
	}
	j.typ, _ = wire.String(h[HeaderType])
	return j, nil
}

// text reads a string header that may be empty (the default exchange is
// ""): a string, or UTF-8 bytes.
func text(v any) (string, bool) {
	switch s := v.(type) {
	case string:
		return s, true
	case []byte:
		return string(s), utf8.Valid(s)
	}
	return "", false
}

// hopHeaders are the headers of a message between rungs: env's (its id,
// correlation, causation, first-seen, origin and application headers),
// typed ScheduledMessage, with the four x-schedule-* headers (and the
// type, when env set one).
func hopHeaders(env acemq.Envelope, j job) map[string]any {
	h := env.AppendHeaders(nil, j.routingKey)
	stripBroker(h)
	h[wire.HeaderType] = ScheduledType
	h[HeaderExchange] = j.exchange
	h[HeaderRoutingKey] = j.routingKey
	h[HeaderDueAt] = j.due.UnixMilli()
	h[HeaderContentType] = j.contentType
	if j.typ != "" {
		h[HeaderType] = j.typ
	} else {
		delete(h, HeaderType)
	}
	return h
}

// stripBroker removes what the broker wrote on a rung's expiry (x-death,
// x-first-death-*, x-last-death-*): it describes the ladder, not the
// message, and would make the delivered message look dead-lettered.
func stripBroker(h map[string]any) {
	for k := range h {
		if k == "x-death" || strings.HasPrefix(k, "x-first-death-") || strings.HasPrefix(k, "x-last-death-") {
			delete(h, k)
		}
	}
}

// deliveredEnvelope is the envelope the due message is delivered with: the
// same id, correlation, causation, version, origin, claim and application
// headers as the scheduled message (docs/wire.md §13 #37), its own type
// (the target routing key when it had none), attempt 1, first seen now (an
// age limit on its consumer measures from the delivery, not from the
// scheduling), and none of the scheduler's or the broker's headers.
// Unknown x-acemq-* headers are not carried: a delivery is a new message
// to its consumer (docs/wire.md §2.5).
func deliveredEnvelope(hop acemq.Envelope, j job, now time.Time) (acemq.Envelope, error) {
	f := hop.Fields()
	f.Type = j.typ
	f.Attempt = 1
	f.FirstSeen = now
	f.Reason = ""
	for _, k := range []string{HeaderExchange, HeaderRoutingKey, HeaderDueAt, HeaderContentType, HeaderType} {
		delete(f.Headers, k)
	}
	stripBroker(f.Headers)
	return acemq.NewEnvelope(f)
}
