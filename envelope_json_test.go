package acemq_test

import (
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/allocbound"
)

// TestEnvelopeIsNotAnError: an Envelope does not satisfy error by
// accident, and printing one shows the envelope, not an empty reason.
func TestEnvelopeIsNotAnError(t *testing.T) {
	var v any = acemq.Envelope{}
	if _, ok := v.(error); ok {
		t.Fatal("acemq.Envelope satisfies error")
	}
	env := mustEnvelope(t, populatedFields())
	s := fmt.Sprint(env)
	for _, want := range []string{"envelope " + env.ID(), "type=order.placed", "attempt=2", "correlation=corr-1", "causation=cause-1",
		"origin=orders@host-7", `reason="the handler rejected it: boom"`, "route=validate,ship@1", "headers=3"} {
		if !strings.Contains(s, want) {
			t.Errorf("fmt.Sprint(env) = %q, which lacks %q", s, want)
		}
	}
	if got := fmt.Sprint(acemq.Envelope{}); got != "envelope (none)" {
		t.Errorf("the zero Envelope prints %q", got)
	}
}

// TestEnvelopeJSONForm: the JSON form is the documented one, field for
// field and in order, with the $-forms for values JSON has no form for.
func TestEnvelopeJSONForm(t *testing.T) {
	env := mustEnvelope(t, acemq.Fields{
		ID: "11111111-2222-3333-4444-555555555555", Type: "order.placed", Version: 2, CorrelationID: "c-1",
		Attempt: 3, FirstSeen: time.UnixMilli(1767323045678), Origin: "o@h", Reason: "r <&>",
		Route: []string{"a", "b"}, RoutePosition: 1, RouteID: "run",
		Headers: map[string]any{
			"b": []byte{0, 1, 2}, "t": time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC), "d": driver.Decimal{Scale: 2, Value: -1250},
			"nan": math.NaN(), "inf": math.Inf(-1), "n": int32(7), "f": 1.5, "nested": map[string]any{"x": []any{true, nil}},
		},
	})
	got, err := env.MarshalJSON() // json.Marshal would escape <, > and & as JSON allows
	if err != nil {
		t.Fatal(err)
	}
	want := `{"id":"11111111-2222-3333-4444-555555555555","type":"order.placed","version":2,"correlationId":"c-1",` +
		`"causationId":"","attempt":3,"firstSeen":1767323045678,"origin":"o@h","error":"r <&>","claim":"",` +
		`"route":["a","b"],"routePosition":1,"routeId":"run","headers":{"b":{"$bytes":"AAEC"},"d":{"$decimal":"-12.50"},` +
		`"f":1.5,"inf":{"$float":"-Inf"},"n":7,"nan":{"$float":"NaN"},"nested":{"x":[true,null]},"t":{"$timestamp":"2026-01-02T03:04:05Z"}}}`
	if string(got) != want {
		t.Errorf("JSON form\n got %s\nwant %s", got, want)
	}
	// An unknown age is null; no route is [].
	r := acemq.ReadEnvelope(map[string]any{"x-acemq-id": "a"}, "rk", "")
	b, _ := json.Marshal(r)
	if !strings.Contains(string(b), `"firstSeen":null`) || !strings.Contains(string(b), `"route":[]`) || !strings.Contains(string(b), `"type":"rk"`) {
		t.Errorf("read envelope JSON %s", b)
	}
}

// TestEnvelopeJSONRoundTrip: what MarshalJSON writes, UnmarshalJSON reads
// back to the same envelope, header values and an unknown age included.
func TestEnvelopeJSONRoundTrip(t *testing.T) {
	full := mustEnvelope(t, populatedFields())
	withValues := change(t, full, func(f *acemq.Fields) {
		f.Headers["ts"] = time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)
		f.Headers["dec"] = driver.Decimal{Scale: 3, Value: 5}
		f.Headers["neg"] = int64(-9)
		f.Headers["inf"] = math.Inf(1)
	})
	unknownAge := acemq.ReadEnvelope(map[string]any{"x-acemq-id": "in-1", "x-acemq-attempt": int32(4), "x-tenant": "acme"}, "orders", "")
	for name, env := range map[string]acemq.Envelope{"populated": full, "values": withValues, "unknown age": unknownAge, "fresh": mustEnvelope(t, acemq.Fields{})} {
		t.Run(name, func(t *testing.T) {
			b, err := json.Marshal(env)
			if err != nil {
				t.Fatal(err)
			}
			var back acemq.Envelope
			if err := json.Unmarshal(b, &back); err != nil {
				t.Fatalf("Unmarshal(%s): %v", b, err)
			}
			if _, known := env.Age(); known {
				if diff := envelopeDiff(back, env); diff != "" {
					t.Errorf("round trip of %s: %s", b, diff)
				}
				if !back.FirstSeen().Equal(env.FirstSeen()) {
					t.Errorf("first seen %v, want %v", back.FirstSeen(), env.FirstSeen())
				}
			} else if _, known := back.Age(); known {
				t.Error("an unknown age came back known")
			} else if f, g := back.Fields(), env.Fields(); func() bool { f.FirstSeen, g.FirstSeen = time.Time{}, time.Time{}; return !reflect.DeepEqual(f, g) }() {
				t.Errorf("round trip of %s:\n got %#v\nwant %#v", b, f, g)
			}
			b2, _ := json.Marshal(back)
			if string(b2) != string(b) && !(name == "unknown age") {
				t.Errorf("second marshal differs:\n%s\n%s", b, b2)
			}
		})
	}
}

func TestEnvelopeUnmarshalJSON(t *testing.T) {
	var e acemq.Envelope
	if err := json.Unmarshal([]byte(`{"type":"t","headers":{"n":7,"x":{"$bytes":"AAE="}}}`), &e); err != nil {
		t.Fatal(err)
	}
	if !uuidShape.MatchString(e.ID()) || e.CorrelationID() != e.ID() || e.Attempt() != 1 || e.Version() != 1 || e.Type() != "t" {
		t.Errorf("absent fields did not take their defaults: %v", e)
	}
	if _, known := e.Age(); !known {
		t.Error("an absent firstSeen is not now")
	}
	if v, _ := e.Header("n"); v != int64(7) {
		t.Errorf("an integral number reads as %T %v, want int64 7", v, v)
	}
	if v, _ := e.Header("x"); !reflect.DeepEqual(v, []byte{0, 1}) {
		t.Errorf("$bytes reads as %#v", v)
	}
	for in, want := range map[string]string{
		`[]`:                                 "is an object",
		`{"id":1}`:                           "malformed",
		`{} {}`:                              "more follows",
		`{"attempt":1.5}`:                    `"attempt" must be a 32-bit integer`,
		`{"version":4294967296}`:             `"version" must be a 32-bit integer`,
		`{"firstSeen":"yesterday"}`:          `"firstSeen" must be epoch milliseconds or null`,
		`{"headers":{"x":{"$bytes":"%%"}}}`:  "not valid base64",
		`{"headers":{"x":{"$float":"big"}}}`: `"$float" must be`,
		`{"headers":[1]}`:                    "an object of header values",
	} {
		var e acemq.Envelope
		err := e.UnmarshalJSON([]byte(in))
		if err == nil || !strings.Contains(err.Error(), want) {
			t.Errorf("Unmarshal(%s) = %v, want an error saying %q", in, err, want)
		}
	}
	var re *acemq.ReservedHeaderError
	if err := json.Unmarshal([]byte(`{"headers":{"x-acemq-id":"mine"}}`), &e); !errors.As(err, &re) {
		t.Errorf("a reserved header in JSON: %v, want a *ReservedHeaderError", err)
	}
}

// TestHeaderValues: values are checked and normalised when the envelope is
// built, not at Send.
func TestHeaderValues(t *testing.T) {
	type tenant string
	type code int16
	env := mustEnvelope(t, acemq.Fields{Headers: map[string]any{
		"int": 42, "uint": uint(7), "u64": uint64(9), "named": tenant("acme"), "code": code(3),
		"strings": []string{"a", "b"}, "table": map[string]int{"x": 1}, "arr": [2]int32{1, 2}, "bytes": []byte("b"),
	}})
	want := map[string]any{
		"int": int64(42), "uint": int64(7), "u64": int64(9), "named": "acme", "code": int16(3),
		"strings": []any{"a", "b"}, "table": map[string]any{"x": int64(1)}, "arr": []any{int32(1), int32(2)}, "bytes": []byte("b"),
	}
	if got := env.Headers(); !reflect.DeepEqual(got, want) {
		t.Errorf("normalised headers\n got %#v\nwant %#v", got, want)
	}
	for name, v := range map[string]any{
		"ch":     make(chan int),
		"fn":     func() {},
		"ptr":    new(int),
		"struct": struct{ A int }{1},
		"big":    uint64(math.MaxUint64),
		"deep":   map[string]any{"a": []any{1, complex(1, 2)}},
		"intkey": map[int]string{1: "x"},
	} {
		_, err := acemq.NewEnvelope(acemq.Fields{Headers: map[string]any{"ok": "fine", name: v}})
		var he *acemq.HeaderValueError
		if !errors.As(err, &he) || he.Name != name {
			t.Errorf("header %s = %T: %v, want a *HeaderValueError naming it", name, v, err)
			continue
		}
		if !strings.Contains(err.Error(), fmt.Sprintf("%q", name)) {
			t.Errorf("the error does not name the header: %v", err)
		}
	}
	_, err := acemq.NewEnvelope(acemq.Fields{Headers: map[string]any{"deep": map[string]any{"a": []any{1, complex(1, 2)}}}})
	if err == nil || !strings.Contains(err.Error(), `at .a[1]`) || !strings.Contains(err.Error(), "complex128") {
		t.Errorf("a nested bad value: %v, want its path and type", err)
	}
}

// FuzzEnvelopeJSON: UnmarshalJSON never panics, and what it accepts
// marshals back to JSON that reads as the same envelope.
func FuzzEnvelopeJSON(f *testing.F) {
	for _, s := range []string{
		`{}`, `{"id":"a","type":"t","attempt":3,"firstSeen":null,"headers":{"x":{"$bytes":"AAE="}}}`,
		`{"headers":{"d":{"$decimal":"-1.25"},"t":{"$timestamp":"2026-01-02T03:04:05Z"},"f":{"$float":"NaN"}}}`,
		`{"route":["a","b"],"routePosition":1,"routeId":"r","version":-4}`, `[`, `{"headers":{"$bytes":1}}`,
	} {
		f.Add([]byte(s))
	}
	f.Add([]byte(`{"headers":{"h":` + strings.Repeat("[", 9000) + strings.Repeat("]", 9000) + `}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var e acemq.Envelope
		var err error
		// What reading the JSON form may cost: encoding/json into maps,
		// then the header values converted (TestHeadersFromJSONMemoryIsLinear).
		allocbound.Check(t, len(data), 128, 64<<10, func() { err = json.Unmarshal(data, &e) })
		if err != nil {
			return
		}
		b, err := json.Marshal(e)
		if err != nil {
			t.Fatalf("Marshal of an envelope read from %q: %v", data, err)
		}
		var back acemq.Envelope
		if err := json.Unmarshal(b, &back); err != nil {
			t.Fatalf("the JSON form %s does not read back: %v", b, err)
		}
		if b2, _ := json.Marshal(back); string(b2) != string(b) {
			t.Fatalf("JSON form not stable:\n%s\n%s", b, b2)
		}
	})
}
