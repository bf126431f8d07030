package acemq_test

import (
	"bytes"
	"encoding/base64"
	"encoding/hex"
	"encoding/json"
	"flag"
	"fmt"
	"maps"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
)

// updateGolden regenerates the "want" half of testdata/envelope/*.json from
// the current reader and writer: go test -run TestEnvelopeGolden -update .
// Review the diff before committing it; the inputs are never rewritten.
var updateGolden = goldenUpdateFlag()

func goldenUpdateFlag() *bool {
	if f := flag.Lookup("update"); f != nil { // another test file registered it
		b, _ := f.Value.(flag.Getter).Get().(bool)
		return &b
	}
	return flag.Bool("update", false, "rewrite the expected half of golden files under testdata/")
}

// goldenCase is one testdata/envelope file: the three inputs of
// ReadEnvelope and what reading them, then writing the headers back with
// the same routing key, must give.
type goldenCase struct {
	About      string                `json:"about"`
	RoutingKey string                `json:"routingKey"`
	MessageID  string                `json:"messageId"`
	Headers    map[string]typedValue `json:"headers"`
	Want       *goldenWant           `json:"want,omitempty"`
}

type goldenWant struct {
	Fields  goldenFields          `json:"fields"`
	Headers map[string]typedValue `json:"headers"`
}

type goldenFields struct {
	ID              string                `json:"id"`
	Type            string                `json:"type"`
	Version         int                   `json:"version"`
	CorrelationID   string                `json:"correlationId"`
	CausationID     string                `json:"causationId"`
	Attempt         int                   `json:"attempt"`
	FirstSeen       string                `json:"firstSeen"`
	FirstSeenKnown  bool                  `json:"firstSeenKnown"`
	Origin          string                `json:"origin"`
	Error           string                `json:"error"`
	Claim           string                `json:"claim"`
	Route           []string              `json:"route"`
	RoutePosition   int                   `json:"routePosition"`
	RouteID         string                `json:"routeId"`
	Headers         map[string]typedValue `json:"headers"`
	UnknownReserved map[string]typedValue `json:"unknownReserved"`
}

// Placeholders for the two values a reader invents.
const (
	goldenFreshID = "<fresh uuid>"
	goldenNow     = "<moment of reading>"
)

// typedValue is a header value together with its Go type, written as a
// one-key object: {"int32": 2}, {"string": "x"}, {"bytes": "utf-8 text"},
// {"bytesHex": "fffe"}, {"float64": 2}, {"bool": true}, {"null": true},
// {"table": {...}}, {"array": [...]}, {"decimal": [scale, value]},
// {"timestamp": "RFC 3339"}. JSON alone cannot say int32 from int64 or
// string from []byte, and those differences are what the reader is for.
type typedValue struct{ v any }

func (tv typedValue) MarshalJSON() ([]byte, error) {
	kv := func(k string, v any) ([]byte, error) { return json.Marshal(map[string]any{k: v}) }
	switch x := tv.v.(type) {
	case nil:
		return kv("null", true)
	case string:
		if x == goldenNow {
			return kv("int64", x)
		}
		return kv("string", x)
	case []byte:
		if isPrintableUTF8(x) {
			return kv("bytes", string(x))
		}
		return kv("bytesHex", hex.EncodeToString(x))
	case bool:
		return kv("bool", x)
	case int:
		return kv("int", x)
	case int8:
		return kv("int8", x)
	case int16:
		return kv("int16", x)
	case int32:
		return kv("int32", x)
	case int64:
		return kv("int64", x)
	case uint8:
		return kv("uint8", x)
	case uint16:
		return kv("uint16", x)
	case uint32:
		return kv("uint32", x)
	case uint64:
		return kv("uint64", x)
	case float32:
		return kv("float32", x)
	case float64:
		return kv("float64", x)
	case time.Time:
		return kv("timestamp", x.UTC().Format(time.RFC3339Nano))
	case driver.Decimal:
		return kv("decimal", []int64{int64(x.Scale), int64(x.Value)})
	case map[string]any:
		m := make(map[string]typedValue, len(x))
		for k, e := range x {
			m[k] = typedValue{e}
		}
		return kv("table", m)
	case []any:
		a := make([]typedValue, len(x))
		for i, e := range x {
			a[i] = typedValue{e}
		}
		return kv("array", a)
	}
	return nil, fmt.Errorf("golden files cannot hold a %T", tv.v)
}

func (tv *typedValue) UnmarshalJSON(b []byte) error {
	var m map[string]json.RawMessage
	if err := json.Unmarshal(b, &m); err != nil {
		return err
	}
	if len(m) != 1 {
		return fmt.Errorf("a typed value is a one-key object, not %s", b)
	}
	for k, raw := range m {
		v, err := decodeTyped(k, raw)
		if err != nil {
			return fmt.Errorf("%s: %w", k, err)
		}
		tv.v = v
	}
	return nil
}

func decodeTyped(kind string, raw json.RawMessage) (any, error) {
	num := func(bits int, signed bool) (any, error) {
		var n json.Number
		if err := json.Unmarshal(raw, &n); err != nil {
			var s string
			if json.Unmarshal(raw, &s) == nil && s == goldenNow {
				return goldenNow, nil
			}
			return nil, err
		}
		if signed {
			return strconv.ParseInt(n.String(), 10, bits)
		}
		return strconv.ParseUint(n.String(), 10, bits)
	}
	switch kind {
	case "null":
		return nil, nil
	case "string":
		var s string
		err := json.Unmarshal(raw, &s)
		return s, err
	case "bytes":
		var s string
		err := json.Unmarshal(raw, &s)
		return []byte(s), err
	case "bytesHex":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return hex.DecodeString(s)
	case "bytesBase64":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return base64.StdEncoding.DecodeString(s)
	case "bool":
		var b bool
		err := json.Unmarshal(raw, &b)
		return b, err
	case "int":
		n, err := num(64, true)
		if i, ok := n.(int64); ok {
			return int(i), err
		}
		return n, err
	case "int8", "int16", "int32", "int64":
		bits, _ := strconv.Atoi(kind[3:])
		n, err := num(bits, true)
		if err != nil {
			return nil, err
		}
		switch i := n.(type) {
		case int64:
			switch bits {
			case 8:
				return int8(i), nil
			case 16:
				return int16(i), nil
			case 32:
				return int32(i), nil
			}
			return i, nil
		}
		return n, nil
	case "uint8", "uint16", "uint32", "uint64":
		bits, _ := strconv.Atoi(kind[4:])
		n, err := num(bits, false)
		if err != nil {
			return nil, err
		}
		u := n.(uint64)
		switch bits {
		case 8:
			return uint8(u), nil
		case 16:
			return uint16(u), nil
		case 32:
			return uint32(u), nil
		}
		return u, nil
	case "float32":
		var f float32
		err := json.Unmarshal(raw, &f)
		return f, err
	case "float64":
		var f float64
		err := json.Unmarshal(raw, &f)
		return f, err
	case "timestamp":
		var s string
		if err := json.Unmarshal(raw, &s); err != nil {
			return nil, err
		}
		return time.Parse(time.RFC3339Nano, s)
	case "decimal":
		var d [2]int64
		if err := json.Unmarshal(raw, &d); err != nil {
			return nil, err
		}
		return driver.Decimal{Scale: uint8(d[0]), Value: int32(d[1])}, nil
	case "table":
		var m map[string]typedValue
		if err := json.Unmarshal(raw, &m); err != nil {
			return nil, err
		}
		return plainValues(m), nil
	case "array":
		var a []typedValue
		if err := json.Unmarshal(raw, &a); err != nil {
			return nil, err
		}
		out := make([]any, len(a))
		for i, e := range a {
			out[i] = e.v
		}
		return out, nil
	}
	return nil, fmt.Errorf("unknown value type %q", kind)
}

func isPrintableUTF8(b []byte) bool {
	s := string(b)
	for _, r := range s {
		if r == 0xFFFD || r < 0x20 {
			return false
		}
	}
	return true
}

func plainValues(m map[string]typedValue) map[string]any {
	if m == nil {
		return nil
	}
	out := make(map[string]any, len(m))
	for k, v := range m {
		out[k] = v.v
	}
	return out
}

func typedValues(m map[string]any) map[string]typedValue {
	out := make(map[string]typedValue, len(m))
	for k, v := range m {
		out[k] = typedValue{v}
	}
	return out
}

// goldenResult reads the case's inputs and renders what came out, with the
// invented values (a fresh id, the moment of reading) as placeholders after
// checking them.
func goldenResult(t *testing.T, c goldenCase) goldenWant {
	t.Helper()
	in := plainValues(c.Headers)
	if in == nil {
		in = map[string]any{}
	}
	inCopy := cloneForCompare(in)
	before := time.Now().Truncate(time.Millisecond)
	env := acemq.ReadEnvelope(in, c.RoutingKey, c.MessageID)
	after := time.Now()
	out := env.AppendHeaders(nil, c.RoutingKey)
	if !sameValue(in, inCopy) {
		t.Error("ReadEnvelope changed the headers it was given")
	}

	f := goldenFields{
		ID: env.ID(), Type: env.Type(), Version: env.Version(), CorrelationID: env.CorrelationID(),
		CausationID: env.CausationID(), Attempt: env.Attempt(), FirstSeenKnown: env.FirstSeenKnown(),
		Origin: env.Origin(), Error: env.Reason(), Claim: env.Claim(), Route: env.Fields().Route,
		RoutePosition: env.Fields().RoutePosition, RouteID: env.Fields().RouteID,
		Headers: typedValues(env.Headers()), UnknownReserved: typedValues(env.UnknownReserved()),
	}
	if f.Route == nil {
		f.Route = []string{}
	}
	if env.FirstSeenKnown() {
		f.FirstSeen = env.FirstSeen().Format("2006-01-02T15:04:05.000Z07:00")
	} else {
		fs := env.FirstSeen()
		if fs.Before(before) || fs.After(after) {
			t.Errorf("an unknown first-seen reads as %v, not the moment of reading (%v…%v)", fs, before, after)
		}
		if out["x-acemq-first-seen"] != fs.UnixMilli() {
			t.Errorf("x-acemq-first-seen written as %v, want the moment of reading %d", out["x-acemq-first-seen"], fs.UnixMilli())
		}
		f.FirstSeen = goldenNow
		out["x-acemq-first-seen"] = goldenNow
	}
	if env.ID() != c.MessageID && !hasStringHeader(in, "x-acemq-id") {
		if !uuidShape.MatchString(env.ID()) {
			t.Errorf("an invented id %q is not a UUID", env.ID())
		}
		if f.CorrelationID == env.ID() {
			f.CorrelationID = goldenFreshID
		}
		f.ID = goldenFreshID
		if out["x-acemq-id"] == env.ID() {
			out["x-acemq-id"] = goldenFreshID
		}
		if out["x-acemq-correlation"] == env.ID() {
			out["x-acemq-correlation"] = goldenFreshID
		}
	}
	return goldenWant{Fields: f, Headers: typedValues(out)}
}

func hasStringHeader(h map[string]any, name string) bool {
	switch v := h[name].(type) {
	case string:
		return v != ""
	case []byte:
		return len(v) > 0
	}
	return false
}

// TestEnvelopeGolden runs every testdata/envelope/*.json case. It also
// checks, for each case, that the written headers read back to the same
// envelope (the writer's output is a fixed point of the reader).
func TestEnvelopeGolden(t *testing.T) {
	files, err := filepath.Glob(filepath.Join("testdata", "envelope", "*.json"))
	if err != nil {
		t.Fatal(err)
	}
	if len(files) == 0 {
		t.Fatal("no golden files under testdata/envelope")
	}
	for _, file := range files {
		t.Run(filepath.Base(file), func(t *testing.T) {
			raw, err := os.ReadFile(file)
			if err != nil {
				t.Fatal(err)
			}
			var c goldenCase
			dec := json.NewDecoder(bytes.NewReader(raw))
			dec.DisallowUnknownFields()
			if err := dec.Decode(&c); err != nil {
				t.Fatalf("parsing: %v", err)
			}
			got := goldenResult(t, c)
			if *updateGolden {
				c.Want = &got
				b, err := json.MarshalIndent(c, "", "  ")
				if err != nil {
					t.Fatal(err)
				}
				if err := os.WriteFile(file, append(b, '\n'), 0o644); err != nil {
					t.Fatal(err)
				}
				return
			}
			if c.Want == nil {
				t.Fatal("the file has no \"want\": run go test -run TestEnvelopeGolden -update . and review it")
			}
			gotJSON, _ := json.MarshalIndent(got, "", "  ")
			wantJSON, _ := json.MarshalIndent(c.Want, "", "  ")
			if !bytes.Equal(gotJSON, wantJSON) {
				t.Errorf("%s: %s\n got %s\nwant %s", file, c.About, gotJSON, wantJSON)
			}
			checkFixedPoint(t, c)
		})
	}
}

// checkFixedPoint reads the case, writes it, reads what was written and
// writes again: the second envelope equals the first field for field
// (FirstSeenKnown aside, which becomes true once written), and the two
// writes are identical.
func checkFixedPoint(t *testing.T, c goldenCase) {
	t.Helper()
	e1 := acemq.ReadEnvelope(plainValues(c.Headers), c.RoutingKey, c.MessageID)
	h1 := e1.AppendHeaders(nil, c.RoutingKey)
	e2 := acemq.ReadEnvelope(h1, c.RoutingKey, c.MessageID)
	h2 := e2.AppendHeaders(nil, c.RoutingKey)
	if d := envelopeDiff(e1, e2); d != "" {
		t.Errorf("reading back what was written changed the envelope: %s", d)
	}
	if !sameValue(h1, h2) {
		t.Errorf("writing twice differs:\n%#v\n%#v", h1, h2)
	}
}

// envelopeDiff names the first field in which a and b differ, or "".
func envelopeDiff(a, b acemq.Envelope) string {
	type pair struct {
		name string
		a, b any
	}
	for _, p := range []pair{
		{"ID", a.ID(), b.ID()}, {"Type", a.Type(), b.Type()}, {"Version", a.Version(), b.Version()},
		{"CorrelationID", a.CorrelationID(), b.CorrelationID()}, {"CausationID", a.CausationID(), b.CausationID()},
		{"Attempt", a.Attempt(), b.Attempt()}, {"FirstSeen", a.FirstSeen().UnixMilli(), b.FirstSeen().UnixMilli()},
		{"Origin", a.Origin(), b.Origin()}, {"Reason", a.Reason(), b.Reason()}, {"Claim", a.Claim(), b.Claim()},
		{"Route", a.Fields().Route, b.Fields().Route}, {"RoutePosition", a.Fields().RoutePosition, b.Fields().RoutePosition},
		{"RouteID", a.Fields().RouteID, b.Fields().RouteID}, {"Headers", a.Headers(), b.Headers()},
		{"UnknownReserved", a.UnknownReserved(), b.UnknownReserved()},
	} {
		if !sameValue(p.a, p.b) {
			return fmt.Sprintf("%s: %#v ≠ %#v", p.name, p.a, p.b)
		}
	}
	return ""
}

// sameValue is reflect.DeepEqual with NaN equal to itself (bitwise), nil
// and empty maps and slices equal, and type differences significant.
func sameValue(a, b any) bool {
	switch x := a.(type) {
	case float64:
		y, ok := b.(float64)
		return ok && (x == y || math.Float64bits(x) == math.Float64bits(y))
	case float32:
		y, ok := b.(float32)
		return ok && (x == y || math.Float32bits(x) == math.Float32bits(y))
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, ok := y[k]
			if !ok || !sameValue(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !sameValue(x[i], y[i]) {
				return false
			}
		}
		return true
	case []string:
		y, ok := b.([]string)
		return ok && slices.Equal(x, y)
	case []byte:
		y, ok := b.([]byte)
		return ok && bytes.Equal(x, y)
	case time.Time:
		y, ok := b.(time.Time)
		return ok && x.Equal(y)
	}
	return a == b
}

func cloneForCompare(h map[string]any) map[string]any {
	out := maps.Clone(h)
	for k, v := range out {
		switch x := v.(type) {
		case []byte:
			out[k] = slices.Clone(x)
		case map[string]any:
			out[k] = cloneForCompare(x)
		case []any:
			a := slices.Clone(x)
			for i, e := range a {
				if m, ok := e.(map[string]any); ok {
					a[i] = cloneForCompare(m)
				}
			}
			out[k] = a
		}
	}
	return out
}
