// Package headerjson reads and writes header values in the JSON form of an
// envelope's headers (docs/envelope.md): the form Envelope's JSON methods
// and the acemq CLI's --header-json flag use. Its errors are fragments
// with no package prefix: the caller's prefix comes first.
package headerjson

import (
	"bytes"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/nesting"
)

// HeadersFromJSON reads a JSON object of header values in the JSON form of
// an envelope's headers ({"$bytes": …} and the other one-key forms, integral
// numbers as int64) into Go values an envelope accepts. Empty input and
// null are no headers. Objects and arrays nested more than 64 deep (twice
// what RabbitMQ carries) are refused before the JSON is parsed, with an
// error wrapping ErrTooDeep. Its errors are fragments, which the caller
// prefixes with its own package's name.
func HeadersFromJSON(data []byte) (map[string]any, error) {
	data = bytes.TrimSpace(data)
	if len(data) == 0 || string(data) == "null" {
		return nil, nil
	}
	if data[0] != '{' {
		return nil, errors.New("headers in JSON are an object of header values")
	}
	if nesting.JSON(data, MaxDepth) {
		return nil, fmt.Errorf("headers in JSON are %w (more than %d levels)", nesting.ErrTooDeep, MaxDepth)
	}
	dec := json.NewDecoder(bytes.NewReader(data))
	dec.UseNumber()
	var m map[string]any
	if err := dec.Decode(&m); err != nil {
		return nil, fmt.Errorf("malformed headers JSON: %s", firstLine(err.Error()))
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

// MaxDepth bounds the nesting HeadersFromJSON reads: the object
// itself, then 63 levels of values.
const MaxDepth = 64

// HeadersToJSON renders header values (an envelope's, or a delivery's) as
// JSON-ready values in the same form (never nil).
func HeadersToJSON(h map[string]any) map[string]any {
	out := make(map[string]any, len(h))
	for k, v := range h {
		out[k] = HeaderToJSON(v)
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
	return nil, fmt.Errorf("header %s: unsupported JSON value %T", where(path), v)
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
			return nil, true, fmt.Errorf(`header %s: "$bytes" must be a base64 string`, where(path))
		}
		b, err := base64.StdEncoding.DecodeString(s)
		if err != nil {
			return nil, true, fmt.Errorf(`header %s: "$bytes" is not valid base64: %s`, where(path), firstLine(err.Error()))
		}
		return b, true, nil
	case "$timestamp":
		if !isString {
			return nil, true, fmt.Errorf(`header %s: "$timestamp" must be an RFC 3339 string`, where(path))
		}
		t, err := time.Parse(time.RFC3339, s)
		if err != nil {
			return nil, true, fmt.Errorf(`header %s: "$timestamp" is not RFC 3339: %q`, where(path), s)
		}
		return t.UTC(), true, nil
	case "$decimal":
		if !isString {
			return nil, true, fmt.Errorf(`header %s: "$decimal" must be a string such as "12.50"`, where(path))
		}
		d, err := parseDecimal(s)
		if err != nil {
			return nil, true, fmt.Errorf("header %s: %w", where(path), err)
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
		return nil, true, fmt.Errorf(`header %s: "$float" must be "NaN", "+Inf" or "-Inf"`, where(path))
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

// HeaderToJSON renders one header value as a JSON-ready value.
func HeaderToJSON(v any) any {
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
			out[i] = HeaderToJSON(e)
		}
		return out
	case map[string]any:
		return HeadersToJSON(x)
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

// firstLine is the first line of s: a JSON decoder's error can quote the
// rest of the input.
func firstLine(s string) string {
	if i := strings.IndexByte(s, '\n'); i >= 0 {
		return s[:i]
	}
	return s
}
