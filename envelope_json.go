package acemq

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq/driver"
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
		Route:         e.Route(),
		RoutePosition: e.routePosition,
		RouteID:       e.routeID,
		Headers:       make(map[string]any, len(e.headers)),
	}
	for _, h := range e.headers {
		out.Headers[h.name] = headerToJSON(h.value)
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
// 64 deep are refused, as HeadersFromJSON refuses them. A reserved name among the
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
	if nesting.JSON(trimmed, maxHeaderJSONDepth+1) {
		return fmt.Errorf("acemq: envelope JSON is %w (headers more than %d levels)", ErrTooDeep, maxHeaderJSONDepth)
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
	if f.Headers, err = HeadersFromJSON(in.Headers); err != nil {
		return err
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

// HeadersFromJSON reads a JSON object of header values in the JSON form of
// an envelope's headers ({"$bytes": …} and the other one-key forms, integral
// numbers as int64) into Go values an envelope accepts. Empty input and
// null are no headers. Objects and arrays nested more than 64 deep (twice
// what RabbitMQ carries) are refused before the JSON is parsed, with an
// error wrapping ErrTooDeep.
func HeadersFromJSON(data []byte) (map[string]any, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return nil, nil
	}
	if data[0] != '{' {
		return nil, errors.New("acemq: headers in JSON are an object of header values")
	}
	if nesting.JSON(data, maxHeaderJSONDepth) {
		return nil, fmt.Errorf("acemq: headers in JSON are %w (more than %d levels)", ErrTooDeep, maxHeaderJSONDepth)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("acemq: malformed headers JSON: %s", firstLine(err.Error()))
	}
	out := make(map[string]any, len(m))
	path := make([]pathStep, 0, 8)
	for k, v := range m {
		cv, err := headerFromJSON(v, append(path, pathStep{key: k}))
		if err != nil {
			return nil, err
		}
		out[k] = cv
	}
	return out, nil
}

// maxHeaderJSONDepth bounds the nesting HeadersFromJSON reads: the object
// itself, then 63 levels of values.
const maxHeaderJSONDepth = 64

// headersToJSON renders header values (an envelope's, or a delivery's) as
// JSON-ready values in the same form (never nil).
func headersToJSON(h map[string]any) map[string]any {
	out := make(map[string]any, len(h))
	for k, v := range h {
		out[k] = headerToJSON(v)
	}
	return out
}

// pathStep is one step of the path to a header value: a key, or an index
// in an array.
type pathStep struct {
	key     string
	index   int
	inArray bool
}

// where renders a path as an error names it: name.key[2].
func where(path []pathStep) string {
	var b strings.Builder
	for i, s := range path {
		switch {
		case s.inArray:
			b.WriteString("[" + strconv.Itoa(s.index) + "]")
		case i > 0:
			b.WriteString("." + s.key)
		default:
			b.WriteString(s.key)
		}
	}
	return b.String()
}

// headerFromJSON turns a decoded JSON value (numbers as json.Number) into a
// header value. path leads to it; it is rendered only for an error, so
// that reading deeply nested headers costs no more than their size.
func headerFromJSON(v any, path []pathStep) (any, error) {
	switch x := v.(type) {
	case nil, string, bool:
		return x, nil
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i, nil
		}
		// Out of float64's range ParseFloat returns ±Inf, which is what
		// such a number is.
		f, _ := strconv.ParseFloat(string(x), 64)
		return f, nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			cv, err := headerFromJSON(e, append(path, pathStep{index: i, inArray: true}))
			if err != nil {
				return nil, err
			}
			out[i] = cv
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for k, inner := range x {
				if special, ok, err := specialFromJSON(k, inner, path); ok || err != nil {
					return special, err
				}
			}
		}
		out := make(map[string]any, len(x))
		for k, e := range x {
			cv, err := headerFromJSON(e, append(path, pathStep{key: k}))
			if err != nil {
				return nil, err
			}
			out[k] = cv
		}
		return out, nil
	}
	return nil, fmt.Errorf("acemq: header %s: unsupported JSON value %T", where(path), v)
}

// specialFromJSON reads the one-key forms {"$bytes": …} and the others.
func specialFromJSON(key string, v any, path []pathStep) (any, bool, error) {
	if !strings.HasPrefix(key, "$") {
		return nil, false, nil
	}
	s, isString := v.(string)
	switch key {
	case "$bytes":
		if !isString {
			return nil, true, fmt.Errorf(`acemq: header %s: "$bytes" must be a base64 string`, where(path))
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, true, fmt.Errorf(`acemq: header %s: "$bytes" is not valid base64: %s`, where(path), firstLine(err.Error()))
		}
		return b, true, nil
	case "$timestamp":
		if !isString {
			return nil, true, fmt.Errorf(`acemq: header %s: "$timestamp" must be an RFC 3339 string`, where(path))
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil, true, fmt.Errorf(`acemq: header %s: "$timestamp" is not RFC 3339: %q`, where(path), s)
		}
		return t.UTC(), true, nil
	case "$decimal":
		if !isString {
			return nil, true, fmt.Errorf(`acemq: header %s: "$decimal" must be a string such as "12.50"`, where(path))
		}
		d, err := parseDecimal(s)
		if err != nil {
			return nil, true, fmt.Errorf("acemq: header %s: %w", where(path), err)
		}
		return d, true, nil
	case "$float":
		switch s {
		case "NaN":
			return math.NaN(), true, nil
		case "+Inf", "Inf":
			return math.Inf(1), true, nil
		case "-Inf":
			return math.Inf(-1), true, nil
		}
		return nil, true, fmt.Errorf(`acemq: header %s: "$float" must be "NaN", "+Inf" or "-Inf"`, where(path))
	}
	return nil, false, nil
}

// parseDecimal reads "digits[.digits]" into an AMQP decimal.
func parseDecimal(s string) (driver.Decimal, error) {
	neg := strings.HasPrefix(s, "-")
	body := strings.TrimPrefix(s, "-")
	intPart, frac, _ := strings.Cut(body, ".")
	if len(frac) > 255 {
		return driver.Decimal{}, fmt.Errorf("decimal %q has too many digits after the point", s)
	}
	digits := intPart + frac
	v, err := strconv.ParseInt(digits, 10, 32)
	if err != nil || digits == "" || strings.ContainsAny(digits, "+-") {
		return driver.Decimal{}, fmt.Errorf("%q is not a decimal that fits an AMQP decimal (32-bit value)", s)
	}
	if neg {
		v = -v
	}
	return driver.Decimal{Scale: uint8(len(frac)), Value: int32(v)}, nil
}

// formatDecimal renders an AMQP decimal as parseDecimal reads it.
func formatDecimal(d driver.Decimal) string {
	v := int64(d.Value)
	neg := v < 0
	if neg {
		v = -v
	}
	s := strconv.FormatInt(v, 10)
	if d.Scale > 0 {
		if len(s) <= int(d.Scale) {
			s = strings.Repeat("0", int(d.Scale)-len(s)+1) + s
		}
		s = s[:len(s)-int(d.Scale)] + "." + s[len(s)-int(d.Scale):]
	}
	if neg {
		s = "-" + s
	}
	return s
}

// headerToJSON renders one header value as a JSON-ready value.
func headerToJSON(v any) any {
	switch x := v.(type) {
	case nil, string, bool, int8, int16, int32, int64, uint8, uint16, uint32, int, uint, uint64:
		return x
	case float32:
		return floatToJSON(float64(x))
	case float64:
		return floatToJSON(x)
	case []byte:
		return map[string]any{"$bytes": base64.StdEncoding.EncodeToString(x)}
	case time.Time:
		return map[string]any{"$timestamp": x.UTC().Format(time.RFC3339)}
	case driver.Decimal:
		return map[string]any{"$decimal": formatDecimal(x)}
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = headerToJSON(e)
		}
		return out
	case map[string]any:
		return headersToJSON(x)
	}
	return fmt.Sprint(v)
}

func floatToJSON(f float64) any {
	switch {
	case math.IsNaN(f):
		return map[string]any{"$float": "NaN"}
	case math.IsInf(f, 1):
		return map[string]any{"$float": "+Inf"}
	case math.IsInf(f, -1):
		return map[string]any{"$float": "-Inf"}
	}
	return f
}
