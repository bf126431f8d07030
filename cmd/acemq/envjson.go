package main

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"math"
	"sort"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
)

// This file is the broker-free heart of `acemq envelope` and of the JSON
// that `acemq consume --json` prints: header values between JSON and the Go
// values of an AMQP field table, and an envelope as a JSON object.
//
// A header value is any JSON value; a byte string is {"$bytes": "<base64>"}.
// JSON numbers keep their form: an integral number becomes an int64, any
// other a float64. On the way out, values JSON has no form for are written
// as one-key objects: {"$bytes": …}, {"$timestamp": "<RFC 3339>"},
// {"$decimal": "<digits>"} and {"$float": "NaN"|"+Inf"|"-Inf"}. Input
// accepts the same forms, so what consume --json prints can be fed back.

// envelopeJSON is an envelope as decode prints it and encode reads it.
// The field order is the order printed.
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

// newEnvelopeJSON renders env: absent strings as "", firstSeen as epoch ms
// or null when unknown, the route as [] when none, and only the application
// headers.
func newEnvelopeJSON(env acemq.Envelope) envelopeJSON {
	out := envelopeJSON{
		ID:            env.ID(),
		Type:          env.Type(),
		Version:       env.Version(),
		CorrelationID: env.CorrelationID(),
		CausationID:   env.CausationID(),
		Attempt:       env.Attempt(),
		Origin:        env.Origin(),
		Error:         env.Error(),
		Claim:         env.Claim(),
		Route:         env.Route(),
		RoutePosition: env.RoutePosition(),
		RouteID:       env.RouteID(),
		Headers:       headersToJSON(env.Headers()),
	}
	if env.FirstSeenKnown() {
		ms := env.FirstSeen().UnixMilli()
		out.FirstSeen = &ms
	}
	if out.Route == nil {
		out.Route = []string{}
	}
	return out
}

// decodeInput is what `acemq envelope decode` reads. Other keys (a fixture
// case's "body", say) are ignored.
type decodeInput struct {
	RoutingKey *string         `json:"routingKey"`
	MessageID  *string         `json:"messageId"`
	Headers    json.RawMessage `json:"headers"`
}

// encodeInput is what `acemq envelope encode` reads.
type encodeInput struct {
	RoutingKey *string         `json:"routingKey"`
	Envelope   json.RawMessage `json:"envelope"`
}

// encodeOutput is what `acemq envelope encode` prints.
type encodeOutput struct {
	MessageID string         `json:"messageId"`
	Headers   map[string]any `json:"headers"`
}

// inputError is malformed input: the message is one line for the user.
type inputError struct{ msg string }

func (e *inputError) Error() string { return e.msg }

func badInput(format string, args ...any) error {
	return &inputError{msg: fmt.Sprintf(format, args...)}
}

// readOneObject decodes exactly one JSON object from data into v, keeping
// numbers as json.Number.
func readOneObject(data []byte, v any) error {
	trimmed := bytes.TrimSpace(data)
	if len(trimmed) == 0 {
		return badInput("expected one JSON object on standard input, got nothing")
	}
	if trimmed[0] != '{' {
		return badInput("expected one JSON object on standard input, got something that does not start with '{'")
	}
	dec := json.NewDecoder(bytes.NewReader(trimmed))
	dec.UseNumber()
	if err := dec.Decode(v); err != nil {
		return badInput("malformed JSON: %s", oneLine(err.Error()))
	}
	if _, err := dec.Token(); err != io.EOF {
		return badInput("expected exactly one JSON object, but more follows it")
	}
	return nil
}

// decodeEnvelope is `acemq envelope decode`: it reads the headers, routing
// key and message-id of a delivery as JSON and returns the envelope the
// library reads from them, as JSON with a trailing newline.
func decodeEnvelope(input []byte) ([]byte, error) {
	var in decodeInput
	if err := readOneObject(input, &in); err != nil {
		return nil, err
	}
	var rk, mid string
	if in.RoutingKey != nil {
		rk = *in.RoutingKey
	}
	if in.MessageID != nil {
		mid = *in.MessageID
	}
	headers, err := headersFromRaw(in.Headers, "headers")
	if err != nil {
		return nil, err
	}
	env := acemq.ReadEnvelope(headers, rk, mid)
	return marshalLine(newEnvelopeJSON(env))
}

// encodeEnvelope is `acemq envelope encode`: it builds an envelope from its
// JSON fields and returns the message-id and the headers a publish with
// that routing key puts on the wire, as JSON with a trailing newline.
func encodeEnvelope(input []byte) ([]byte, error) {
	var in encodeInput
	if err := readOneObject(input, &in); err != nil {
		return nil, err
	}
	var rk string
	if in.RoutingKey != nil {
		rk = *in.RoutingKey
	}
	raw := bytes.TrimSpace(in.Envelope)
	if len(raw) == 0 || string(raw) == "null" {
		raw = []byte("{}")
	}
	if raw[0] != '{' {
		return nil, badInput(`"envelope" must be a JSON object`)
	}
	var ej struct {
		ID            *string         `json:"id"`
		Type          *string         `json:"type"`
		Version       *json.Number    `json:"version"`
		CorrelationID *string         `json:"correlationId"`
		CausationID   *string         `json:"causationId"`
		Attempt       *json.Number    `json:"attempt"`
		FirstSeen     *json.Number    `json:"firstSeen"`
		Origin        *string         `json:"origin"`
		Error         *string         `json:"error"`
		Claim         *string         `json:"claim"`
		Route         []string        `json:"route"`
		RoutePosition *json.Number    `json:"routePosition"`
		RouteID       *string         `json:"routeId"`
		Headers       json.RawMessage `json:"headers"`
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	if err := dec.Decode(&ej); err != nil {
		return nil, badInput("malformed \"envelope\": %s", oneLine(err.Error()))
	}
	var f acemq.Fields
	str := func(p *string) string {
		if p == nil {
			return ""
		}
		return *p
	}
	f.ID = str(ej.ID)
	f.Type = str(ej.Type)
	f.CorrelationID = str(ej.CorrelationID)
	f.CausationID = str(ej.CausationID)
	f.Origin = str(ej.Origin)
	if ej.Origin == nil {
		// A publish stamps the connection's origin on an envelope without
		// one; an explicit "" (as decode prints an absent origin) means none,
		// as on a republish of a message that had none.
		f.Origin = acemq.DefaultOrigin()
	}
	f.Error = str(ej.Error)
	f.Claim = str(ej.Claim)
	f.RouteID = str(ej.RouteID)
	var err error
	if f.Version, err = smallInt(ej.Version, "version"); err != nil {
		return nil, err
	}
	if f.Attempt, err = smallInt(ej.Attempt, "attempt"); err != nil {
		return nil, err
	}
	if f.RoutePosition, err = smallInt(ej.RoutePosition, "routePosition"); err != nil {
		return nil, err
	}
	if ej.FirstSeen != nil {
		ms, err := ej.FirstSeen.Int64()
		if err != nil {
			return nil, badInput(`"firstSeen" must be an integer (epoch milliseconds) or null, not %s`, ej.FirstSeen.String())
		}
		f.FirstSeen = time.UnixMilli(ms)
	}
	for _, s := range ej.Route {
		if s = strings.TrimSpace(s); s != "" {
			f.Route = append(f.Route, s)
		}
	}
	if f.Headers, err = headersFromRaw(ej.Headers, "envelope.headers"); err != nil {
		return nil, err
	}
	env, err := acemq.NewEnvelope(f)
	if err != nil {
		var re *acemq.ReservedHeaderError
		if errors.As(err, &re) {
			return nil, badInput("these header names belong to AceMQ and cannot be set by hand: %s", strings.Join(re.Names, ", "))
		}
		return nil, badInput("%s", oneLine(err.Error()))
	}
	wire := env.AppendHeaders(nil, rk)
	return marshalLine(encodeOutput{MessageID: env.ID(), Headers: headersToJSON(wire)})
}

// smallInt reads an optional JSON integer that fits an int32 (0 when absent).
func smallInt(n *json.Number, name string) (int, error) {
	if n == nil {
		return 0, nil
	}
	v, err := n.Int64()
	if err != nil || v < math.MinInt32 || v > math.MaxInt32 {
		return 0, badInput("%q must be an integer, not %s", name, n.String())
	}
	return int(v), nil
}

// headersFromRaw reads a JSON object of header values (absent or null is no
// headers).
func headersFromRaw(raw json.RawMessage, where string) (map[string]any, error) {
	raw = bytes.TrimSpace(raw)
	if len(raw) == 0 || string(raw) == "null" {
		return nil, nil
	}
	if raw[0] != '{' {
		return nil, badInput("%q must be a JSON object of header values", where)
	}
	dec := json.NewDecoder(bytes.NewReader(raw))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, badInput("malformed %q: %s", where, oneLine(err.Error()))
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		cv, err := headerFromJSON(v, where+"."+k)
		if err != nil {
			return nil, err
		}
		out[k] = cv
	}
	return out, nil
}

// headerFromJSON turns a decoded JSON value (numbers as json.Number) into an
// AMQP field-table value.
func headerFromJSON(v any, where string) (any, error) {
	switch x := v.(type) {
	case nil, string, bool:
		return x, nil
	case json.Number:
		return numberFromJSON(x), nil
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			cv, err := headerFromJSON(e, fmt.Sprintf("%s[%d]", where, i))
			if err != nil {
				return nil, err
			}
			out[i] = cv
		}
		return out, nil
	case map[string]any:
		if len(x) == 1 {
			for k, inner := range x {
				if special, ok, err := specialFromJSON(k, inner, where); ok || err != nil {
					return special, err
				}
			}
		}
		out := make(driver.Table, len(x))
		for k, e := range x {
			cv, err := headerFromJSON(e, where+"."+k)
			if err != nil {
				return nil, err
			}
			out[k] = cv
		}
		return out, nil
	default:
		return nil, badInput("%s: unsupported JSON value %T", where, v)
	}
}

// specialFromJSON reads the one-key forms {"$bytes": …} and friends.
func specialFromJSON(key string, v any, where string) (any, bool, error) {
	if !strings.HasPrefix(key, "$") {
		return nil, false, nil
	}
	s, isString := v.(string)
	switch key {
	case "$bytes":
		if !isString {
			return nil, true, badInput(`%s: "$bytes" must be a base64 string`, where)
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, true, badInput(`%s: "$bytes" is not valid base64: %s`, where, oneLine(err.Error()))
		}
		return b, true, nil
	case "$timestamp":
		if !isString {
			return nil, true, badInput(`%s: "$timestamp" must be an RFC 3339 string`, where)
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil, true, badInput(`%s: "$timestamp" is not RFC 3339: %q`, where, s)
		}
		return t.UTC(), true, nil
	case "$decimal":
		if !isString {
			return nil, true, badInput(`%s: "$decimal" must be a string such as "12.50"`, where)
		}
		d, err := parseDecimal(s)
		if err != nil {
			return nil, true, badInput("%s: %v", where, err)
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
		return nil, true, badInput(`%s: "$float" must be "NaN", "+Inf" or "-Inf"`, where)
	}
	return nil, false, nil
}

// numberFromJSON keeps an integral JSON number an integer (int64) and makes
// anything else a float64.
func numberFromJSON(n json.Number) any {
	if i, err := strconv.ParseInt(string(n), 10, 64); err == nil {
		return i
	}
	// Out of float64's range ParseFloat returns ±Inf, which is what such a
	// number is.
	f, _ := strconv.ParseFloat(string(n), 64)
	return f
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

// headersToJSON renders a header table as JSON-ready values (never nil).
func headersToJSON(h map[string]any) map[string]any {
	out := make(map[string]any, len(h))
	for k, v := range h {
		out[k] = headerToJSON(v)
	}
	return out
}

// headerToJSON renders one field-table value as a JSON-ready value.
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
	default:
		return fmt.Sprint(x)
	}
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

// marshalLine marshals v compactly, without HTML escaping, with a newline.
func marshalLine(v any) ([]byte, error) {
	var buf bytes.Buffer
	enc := json.NewEncoder(&buf)
	enc.SetEscapeHTML(false)
	if err := enc.Encode(v); err != nil {
		return nil, fmt.Errorf("rendering JSON: %w", err)
	}
	return buf.Bytes(), nil
}

// bodyJSON sets body (UTF-8 text) or bodyBase64.
func bodyJSON(b []byte) (text, b64 *string) {
	if utf8.Valid(b) {
		s := string(b)
		return &s, nil
	}
	s := base64.StdEncoding.EncodeToString(b)
	return nil, &s
}

// oneLine keeps the first line of a message.
func oneLine(s string) string {
	s, _, _ = strings.Cut(s, "\n")
	return s
}

// sortedKeys returns the keys of m, sorted.
func sortedKeys[V any](m map[string]V) []string {
	ks := make([]string, 0, len(m))
	for k := range m {
		ks = append(ks, k)
	}
	sort.Strings(ks)
	return ks
}
