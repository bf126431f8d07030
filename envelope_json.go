package acemq

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq/internal/headerjson"
	"github.com/acemq/acemq/internal/nesting"
)

// The JSON form of an envelope, the one `acemq envelope` and `acemq consume
// --json` print and docs/envelope.md documents:
//
//	{"id":"…","type":"order.placed","version":1,"correlationId":"…",
//	 "causationId":"","attempt":1,"firstSeen":1767323045678,"origin":"",
//	 "error":"","claim":"","route":[],"routePosition":0,"routeId":"",
//	 "headers":{"tenant":"acme"}}
//
// Every field is always written, in that order: absent strings as "",
// firstSeen as epoch milliseconds or null when the age is unknown, route as
// [] when there is none, headers the application headers only. Header
// values are JSON values; the AMQP values JSON has no form for are one-key
// objects: {"$bytes":"<base64>"}, {"$timestamp":"<RFC 3339>"},
// {"$decimal":"<digits>"} and {"$float":"NaN"|"+Inf"|"-Inf"}. Integral JSON
// numbers are read as int64, others as float64.

// envelopeJSON is the JSON form; the field order is the order written.
type envelopeJSON struct {
	ID            string         `json:"id"`
	Type          string         `json:"type"`
	Version       int            `json:"version"`
	CorrelationID string         `json:"correlationId"`
	CausationID   string         `json:"causationId"`
	Attempt       int            `json:"attempt"`
	FirstSeen     *int64         `json:"firstSeen"`
	Origin        string         `json:"origin"`
	Error         string         `json:"error"`
	Claim         string         `json:"claim"`
	Route         []string       `json:"route"`
	RoutePosition int            `json:"routePosition"`
	RouteID       string         `json:"routeId"`
	Headers       map[string]any `json:"headers"`
}

// MarshalJSON writes the envelope's JSON form (see the package docs and
// docs/envelope.md). The zero Envelope is written with the defaults of a
// fresh one. Unknown x-acemq-* headers are not part of it.
func (e Envelope) MarshalJSON() ([]byte, error) {
	e = e.orDefault()
	out := envelopeJSON{
		ID:            e.id,
		Type:          e.typ,
		Version:       e.version,
		CorrelationID: e.correlationID,
		CausationID:   e.causationID,
		Attempt:       e.attempt,
		Origin:        e.origin,
		Error:         e.reason,
		Claim:         e.claim,
		Route:         slices.Clone(e.route),
		RoutePosition: e.routePosition,
		RouteID:       e.routeID,
		Headers:       make(map[string]any, len(e.headers)),
	}
	for _, h := range e.headers {
		out.Headers[h.name] = headerjson.HeaderToJSON(h.value)
	}
	if !e.ageUnknown {
		ms := e.firstSeen.UnixMilli()
		out.FirstSeen = &ms
	}
	if out.Route == nil {
		out.Route = []string{}
	}
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(out); err != nil {
		return nil, fmt.Errorf("acemq: writing an envelope as JSON: %w", err)
	}
	return bytes.TrimSuffix(buf.Bytes(), []byte{'\n'}), nil
}

// UnmarshalJSON reads the JSON form MarshalJSON writes into e, building the
// envelope as NewEnvelope does: an absent field takes its default (a fresh
// id, correlation = id, version and attempt 1, first seen now), while
// "firstSeen": null means the age is unknown, as for a message that
// arrived without one. Unknown keys are ignored. Headers nested more than
// 64 deep are refused, as every reader of the JSON form refuses them. A reserved name among the
// headers fails with a *ReservedHeaderError; malformed JSON, a number that
// is not a 32-bit integer where one is due, or a malformed $-form with an
// error saying what is wrong.
func (e *Envelope) UnmarshalJSON(data []byte) error {
	var in struct {
		ID            *string         `json:"id"`
		Type          *string         `json:"type"`
		Version       *json.Number    `json:"version"`
		CorrelationID *string         `json:"correlationId"`
		CausationID   *string         `json:"causationId"`
		Attempt       *json.Number    `json:"attempt"`
		FirstSeen     json.RawMessage `json:"firstSeen"`
		Origin        *string         `json:"origin"`
		Error         *string         `json:"error"`
		Claim         *string         `json:"claim"`
		Route         []string        `json:"route"`
		RoutePosition *json.Number    `json:"routePosition"`
		RouteID       *string         `json:"routeId"`
		Headers       json.RawMessage `json:"headers"`
	}
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 || trimmed[0] != '{' {
		return errors.New("acemq: an envelope's JSON form is an object")
	}
	if nesting.JSON(trimmed, headerjson.MaxDepth+1) {
		return fmt.Errorf("acemq: envelope JSON is %w (headers more than %d levels)", ErrTooDeep, headerjson.MaxDepth)
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	if err := dec.Decode(&in); err != nil {
		return fmt.Errorf("acemq: malformed envelope JSON: %s", firstLine(err.Error()))
	}
	if _, err := dec.Token(); err != io.EOF {
		return errors.New("acemq: malformed envelope JSON: more follows the object")
	}
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	f := Fields{
		ID:            str(in.ID),
		Type:          str(in.Type),
		CorrelationID: str(in.CorrelationID),
		CausationID:   str(in.CausationID),
		Origin:        str(in.Origin),
		Reason:        str(in.Error),
		Claim:         str(in.Claim),
		Route:         in.Route,
		RouteID:       str(in.RouteID),
	}
	var err error
	if f.Version, err = int32Field(in.Version, "version"); err != nil {
		return err
	}
	if f.Attempt, err = int32Field(in.Attempt, "attempt"); err != nil {
		return err
	}
	if f.RoutePosition, err = int32Field(in.RoutePosition, "routePosition"); err != nil {
		return err
	}
	unknownAge := false
	switch fs := bytes.TrimSpace(in.FirstSeen); {
	case len(fs) == 0:
	case string(fs) == "null":
		unknownAge = true
	default:
		ms, err := strconv.ParseInt(string(fs), 10, 64)
		if err != nil {
			return fmt.Errorf(`acemq: envelope JSON: "firstSeen" must be epoch milliseconds or null, not %s`, fs)
		}
		f.FirstSeen = time.UnixMilli(ms)
	}
	if f.Headers, err = headerjson.HeadersFromJSON(in.Headers); err != nil {
		return fmt.Errorf("acemq: %w", err)
	}
	n, err := NewEnvelope(f)
	if err != nil {
		return err
	}
	if unknownAge {
		n.ageUnknown = true
	}
	*e = n
	return nil
}

func int32Field(n *json.Number, name string) (int, error) {
	if n == nil {
		return 0, nil
	}
	v, err := n.Int64()
	if err != nil || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, fmt.Errorf("acemq: envelope JSON: %q must be a 32-bit integer, not %s", name, n.String())
	}
	return int(v), nil
}

func firstLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}
