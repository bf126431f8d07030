package acemq_test

import (
	"encoding/json"
	"fmt"
	"maps"
	"math"
	"os"
	"regexp"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/internal/wire"
)

// envFixtureFile is envelope-fixtures.json (docs/wire.md §1.1).
type envFixtureFile struct {
	GeneratedBy string           `json:"generatedBy"`
	Contract    string           `json:"contract"`
	Cases       []envFixtureCase `json:"cases"`
}

type envFixtureCase struct {
	Case        string         `json:"case"`
	RoutingKey  string         `json:"routingKey"`
	MessageID   string         `json:"messageId"`
	Body        string         `json:"body"`
	ContentType string         `json:"contentType"`
	Headers     map[string]any `json:"headers"` // numbers are float64, as encoding/json decodes them
}

func loadEnvelopeFixtures(t *testing.T) envFixtureFile {
	t.Helper()
	raw, err := os.ReadFile(testenv.ContractFile(t, "envelope-fixtures.json"))
	if err != nil {
		t.Fatal(err)
	}
	var f envFixtureFile
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatalf("envelope-fixtures.json does not parse: %v", err)
	}
	if f.GeneratedBy != "acemq-java-amqp FixtureGen" {
		t.Errorf("generatedBy = %q", f.GeneratedBy)
	}
	if f.Contract != "the headers an AceMQ publish puts on the wire" {
		t.Errorf("contract = %q", f.Contract)
	}
	if len(f.Cases) == 0 {
		t.Fatal("envelope-fixtures.json has no cases")
	}
	return f
}

// wireHeaders converts JSON-decoded headers to what an AMQP client hands
// over: whole-number float64 → int64 (Java wrote them as integers), strings
// as strings. A fractional number would be a fixture the test does not
// understand.
func wireHeaders(t *testing.T, h map[string]any) map[string]any {
	t.Helper()
	out := make(map[string]any, len(h))
	for k, v := range h {
		switch x := v.(type) {
		case float64:
			if x != math.Trunc(x) {
				t.Fatalf("header %s = %v: the fixture carries integers only", k, x)
			}
			out[k] = int64(x)
		case string:
			out[k] = x
		default:
			t.Fatalf("header %s has a %T; the fixture carries strings and integers", k, v)
		}
	}
	return out
}

// compareWireHeaders asserts that got is want with no header gained, lost
// or renamed, strings still strings and integers still integers (compared
// as integers, whatever their width). want's values are JSON-decoded
// (float64 for numbers). passThroughFloats allows a non-reserved header fed
// in as float64 to come back as that float64 (application headers pass
// through as received).
func compareWireHeaders(t *testing.T, got, want map[string]any, passThroughFloats bool) {
	t.Helper()
	for _, k := range slices.Sorted(maps.Keys(want)) {
		g, ok := got[k]
		if !ok {
			t.Errorf("header %s lost", k)
			continue
		}
		switch w := want[k].(type) {
		case string:
			if gs, ok := g.(string); !ok {
				t.Errorf("header %s: got a %T (%v), want the string %q", k, g, g, w)
			} else if gs != w {
				t.Errorf("header %s = %q, want %q", k, gs, w)
			}
		case float64:
			if gi, ok := wire.Integer(g); ok {
				if gi != int64(w) {
					t.Errorf("header %s = %d, want %d", k, gi, int64(w))
				}
				continue
			}
			if gf, ok := g.(float64); ok && passThroughFloats && !acemq.IsReserved(k) {
				if gf != w {
					t.Errorf("header %s = %v, want %v", k, gf, w)
				}
				continue
			}
			t.Errorf("header %s: got a %T (%v), want the integer %d", k, g, g, int64(w))
		default:
			t.Fatalf("header %s: fixture value of unexpected type %T", k, w)
		}
	}
	for _, k := range slices.Sorted(maps.Keys(got)) {
		if _, ok := want[k]; !ok {
			t.Errorf("header %s gained (= %v)", k, got[k])
		}
	}
}

var (
	uuidShape   = regexp.MustCompile(`^[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$`)
	originShape = regexp.MustCompile(`^acemq@.+$`)
	bodyShape   = regexp.MustCompile(`^\{"id":"o-[0-9]+"\}$`)
)

// checkFixtureFields asserts conformance step 2: the envelope's fields are
// the fixture's headers, with expectations derived from the headers here
// rather than from the reader.
func checkFixtureFields(t *testing.T, c envFixtureCase, env acemq.Envelope) {
	t.Helper()
	str := func(name string) string { s, _ := c.Headers[name].(string); return s }
	num := func(name string, def int) int {
		if f, ok := c.Headers[name].(float64); ok {
			return int(f)
		}
		return def
	}
	wantID := str("x-acemq-id")
	if wantID == "" {
		wantID = c.MessageID
	}
	wantType := str("x-acemq-type")
	if wantType == "" {
		wantType = c.RoutingKey
	}
	wantCorr := str("x-acemq-correlation")
	if wantCorr == "" {
		wantCorr = wantID
	}
	for _, f := range []struct {
		name      string
		got, want any
	}{
		{"ID", env.ID(), wantID},
		{"Type", env.Type(), wantType},
		{"Version", env.Version(), num("x-acemq-version", 1)},
		{"CorrelationID", env.CorrelationID(), wantCorr},
		{"CausationID", env.CausationID(), str("x-acemq-causation")},
		{"Attempt", env.Attempt(), num("x-acemq-attempt", 1)},
		{"Origin", env.Origin(), str("x-acemq-origin")},
		{"Error", env.Reason(), str("x-acemq-error")},
		{"Claim", env.Claim(), str("x-acemq-claim")},
	} {
		if f.got != f.want {
			t.Errorf("%s = %v, want %v", f.name, f.got, f.want)
		}
	}
	if env.ID() != c.MessageID {
		t.Errorf("ID %q differs from the AMQP message-id %q", env.ID(), c.MessageID)
	}
	if fs, ok := c.Headers["x-acemq-first-seen"].(float64); ok {
		if got := env.FirstSeen().UnixMilli(); got != int64(fs) {
			t.Errorf("FirstSeen = %d ms, want %d ms", got, int64(fs))
		}
		if !env.FirstSeenKnown() {
			t.Error("FirstSeenKnown = false for a message with a first-seen header")
		}
		if _, ok := env.Age(); !ok {
			t.Error("Age unknown for a message with a first-seen header")
		}
	}
	app := env.Headers()
	for k, v := range c.Headers {
		if acemq.IsReserved(k) {
			continue
		}
		got, ok := app[k]
		if !ok {
			t.Errorf("application header %s missing from Headers()", k)
			continue
		}
		if gi, ok := wire.Integer(got); ok {
			if f, _ := v.(float64); gi != int64(f) {
				t.Errorf("application header %s = %v, want %v", k, got, v)
			}
		} else if got != v {
			t.Errorf("application header %s = %v (%T), want %v", k, got, got, v)
		}
	}
	for k := range app {
		if strings.HasPrefix(strings.ToLower(k), "x-acemq-") {
			t.Errorf("reserved header %s handed to the application", k)
		}
	}
}

// TestEnvelopeFixtures is the conformance procedure of docs/wire.md §1.1: read
// each case with the consumer's reader, check the fields, write the headers
// back with the publisher's writer and compare.
func TestEnvelopeFixtures(t *testing.T) {
	f := loadEnvelopeFixtures(t)
	for _, c := range f.Cases {
		t.Run(c.Case, func(t *testing.T) {
			env := acemq.ReadEnvelope(wireHeaders(t, c.Headers), c.RoutingKey, c.MessageID)
			checkFixtureFields(t, c, env)
			compareWireHeaders(t, env.AppendHeaders(nil, c.RoutingKey), c.Headers, false)
		})
	}
}

// TestEnvelopeFixturesWholeFloats feeds the fixture headers exactly as
// encoding/json decodes them — every number a float64, as a store that
// kept headers as JSON would hand them back (docs/wire.md §13 row 38). The
// reader accepts whole floats; known fields are written back as integers,
// application headers as received.
func TestEnvelopeFixturesWholeFloats(t *testing.T) {
	f := loadEnvelopeFixtures(t)
	for _, c := range f.Cases {
		t.Run(c.Case, func(t *testing.T) {
			env := acemq.ReadEnvelope(maps.Clone(c.Headers), c.RoutingKey, c.MessageID)
			checkFixtureFields(t, c, env)
			compareWireHeaders(t, env.AppendHeaders(nil, c.RoutingKey), c.Headers, true)
		})
	}
}

// TestEnvelopeFixtureReplayedAtEitherEncoding runs the round trip for the
// replayed case with acemq-replayed-at as the RFC 3339 string of this copy
// and as the integer epoch ms of older copies: the value is kept with its
// type (docs/wire.md §1.1 step 5).
func TestEnvelopeFixtureReplayedAtEitherEncoding(t *testing.T) {
	f := loadEnvelopeFixtures(t)
	var found bool
	for _, c := range f.Cases {
		at, ok := c.Headers["acemq-replayed-at"]
		if !ok {
			continue
		}
		found = true
		if s, ok := at.(string); ok {
			ts, err := time.Parse(time.RFC3339Nano, s)
			if err != nil {
				t.Fatalf("acemq-replayed-at %q is not RFC 3339: %v", s, err)
			}
			if ts.UnixMilli() != 1770091506789 {
				t.Errorf("acemq-replayed-at %q is %d ms, want the contract's 1770091506789", s, ts.UnixMilli())
			}
		}
		for name, v := range map[string]any{
			"string":   "2026-02-03T04:05:06.789Z",
			"epoch-ms": float64(1770091506789),
		} {
			t.Run(c.Case+"/"+name, func(t *testing.T) {
				h := maps.Clone(c.Headers)
				h["acemq-replayed-at"] = v
				env := acemq.ReadEnvelope(wireHeaders(t, h), c.RoutingKey, c.MessageID)
				got := env.AppendHeaders(nil, c.RoutingKey)
				compareWireHeaders(t, got, h, false)
				if name == "string" {
					if _, ok := got["acemq-replayed-at"].(string); !ok {
						t.Errorf("acemq-replayed-at came back as %T", got["acemq-replayed-at"])
					}
				} else if n, ok := got["acemq-replayed-at"].(int64); !ok || n != 1770091506789 {
					t.Errorf("acemq-replayed-at came back as %T %v, want int64 1770091506789", got["acemq-replayed-at"], got["acemq-replayed-at"])
				}
			})
		}
	}
	if !found {
		t.Fatal("no fixture case carries acemq-replayed-at; the replayed case is missing")
	}
}

// TestEnvelopeFixtureMinimalShape asserts the shapes of the minimal case's
// non-reproducible values, and that a fresh envelope published with the
// minimal case's routing key puts exactly the same header names, in the
// same types, on the wire as Java did.
func TestEnvelopeFixtureMinimalShape(t *testing.T) {
	f := loadEnvelopeFixtures(t)
	i := slices.IndexFunc(f.Cases, func(c envFixtureCase) bool { return c.Case == "minimal" })
	if i < 0 {
		t.Fatal("the fixture has no minimal case")
	}
	c := f.Cases[i]
	check := func(t *testing.T, h map[string]any, messageID string) {
		t.Helper()
		id, _ := h["x-acemq-id"].(string)
		if !uuidShape.MatchString(id) {
			t.Errorf("x-acemq-id %q is not a lower-case canonical UUID", id)
		}
		if id != messageID {
			t.Errorf("x-acemq-id %q differs from the message-id %q", id, messageID)
		}
		if corr, _ := h["x-acemq-correlation"].(string); corr != id {
			t.Errorf("x-acemq-correlation %q differs from the id %q", corr, id)
		}
		switch fs := h["x-acemq-first-seen"].(type) {
		case float64:
			if fs != math.Trunc(fs) || fs <= 0 {
				t.Errorf("x-acemq-first-seen %v is not a positive integer", fs)
			}
		default:
			if n, ok := wire.Integer(fs); !ok || n <= 0 {
				t.Errorf("x-acemq-first-seen %v (%T) is not a positive integer", fs, fs)
			}
		}
		if o, _ := h["x-acemq-origin"].(string); !originShape.MatchString(o) {
			t.Errorf("x-acemq-origin %q does not match acemq@.+", o)
		}
	}
	t.Run("fixture", func(t *testing.T) { check(t, c.Headers, c.MessageID) })
	t.Run("fresh", func(t *testing.T) {
		env, err := acemq.NewEnvelope(acemq.Fields{Origin: acemq.DefaultOrigin()})
		if err != nil {
			t.Fatal(err)
		}
		got := env.AppendHeaders(nil, c.RoutingKey)
		check(t, got, env.ID())
		if len(got) != len(c.Headers) {
			t.Errorf("a fresh envelope writes %d headers %v, Java's minimal case %d", len(got), slices.Sorted(maps.Keys(got)), len(c.Headers))
		}
		for k, w := range c.Headers {
			g, ok := got[k]
			if !ok {
				t.Errorf("a fresh envelope does not write %s", k)
				continue
			}
			_, wantInt := w.(float64)
			_, gotInt := wire.Integer(g)
			if wantInt != gotInt {
				t.Errorf("%s: a fresh envelope writes a %T, Java a %T", k, g, w)
			}
		}
		for _, k := range []string{"x-acemq-type", "x-acemq-version", "x-acemq-attempt"} {
			if fmt.Sprint(got[k]) != fmt.Sprint(c.Headers[k]) {
				t.Errorf("%s = %v, Java wrote %v", k, got[k], c.Headers[k])
			}
		}
	})
}

// TestEnvelopeFixtureBodies pins the JSON codec against the fixture bodies:
// Java published a string through its JSON codec, so decoding yields a
// string (not an object) and encoding that string reproduces the body
// byte for byte.
func TestEnvelopeFixtureBodies(t *testing.T) {
	f := loadEnvelopeFixtures(t)
	for _, c := range f.Cases {
		t.Run(c.Case, func(t *testing.T) {
			if !acemq.JSON.Accepts(c.ContentType) {
				t.Fatalf("the JSON codec does not read content type %q", c.ContentType)
			}
			var s string
			if err := acemq.JSON.Decode([]byte(c.Body), c.ContentType, &s); err != nil {
				t.Fatalf("decoding %q into a string: %v", c.Body, err)
			}
			if !bodyShape.MatchString(s) {
				t.Errorf("decoded %q, want a string like {\"id\":\"o-1\"}", s)
			}
			var generic any
			if err := acemq.JSON.Decode([]byte(c.Body), c.ContentType, &generic); err != nil {
				t.Fatal(err)
			}
			if _, ok := generic.(string); !ok {
				t.Errorf("the body decodes to a %T, want a string literal", generic)
			}
			b, err := acemq.JSON.Encode(s)
			if err != nil {
				t.Fatal(err)
			}
			if string(b) != c.Body {
				t.Errorf("encoding %q gives %q, want the fixture's %q", s, b, c.Body)
			}
			if acemq.JSON.ContentType() != c.ContentType {
				t.Errorf("the JSON codec writes %q, the fixture %q", acemq.JSON.ContentType(), c.ContentType)
			}
		})
	}
	// The minimal case's body, independently of the file.
	b, err := acemq.JSON.Encode(`{"id":"o-1"}`)
	if err != nil || string(b) != `"{\"id\":\"o-1\"}"` {
		t.Errorf(`Encode({"id":"o-1"}) = %q, %v`, b, err)
	}
}
