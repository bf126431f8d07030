package acemq_test

import (
	"errors"
	"math"
	"reflect"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
)

func mustEnvelope(t *testing.T, f acemq.Fields) acemq.Envelope {
	t.Helper()
	e, err := acemq.NewEnvelope(f)
	if err != nil {
		t.Fatalf("NewEnvelope: %v", err)
	}
	return e
}

func populatedFields() acemq.Fields {
	return acemq.Fields{
		ID:            "11111111-2222-3333-4444-555555555555",
		Type:          "order.placed",
		Version:       3,
		CorrelationID: "corr-1",
		CausationID:   "cause-1",
		Attempt:       2,
		FirstSeen:     time.UnixMilli(1767323045678),
		Origin:        "orders@host-7",
		Error:         "the handler rejected it: boom",
		Claim:         "s3://payloads/orders/o-4",
		Route:         []string{"validate", "ship"},
		RoutePosition: 1,
		RouteID:       "aaaaaaaa-bbbb-4ccc-8ddd-eeeeeeeeeeee",
		Headers: map[string]any{
			"x-tenant": "acme",
			"nested":   map[string]any{"a": []any{int64(1), "two"}},
			"raw":      []byte("bytes"),
		},
	}
}

func TestNewEnvelopeDefaults(t *testing.T) {
	before := time.Now().Truncate(time.Millisecond)
	e := mustEnvelope(t, acemq.Fields{})
	after := time.Now()
	if !uuidShape.MatchString(e.ID()) {
		t.Errorf("ID %q is not a lower-case canonical UUID", e.ID())
	}
	if e.ID()[14] != '4' || !strings.ContainsRune("89ab", rune(e.ID()[19])) {
		t.Errorf("ID %q is not a version 4, RFC 4122 UUID", e.ID())
	}
	if e.CorrelationID() != e.ID() {
		t.Errorf("CorrelationID %q, want the id %q", e.CorrelationID(), e.ID())
	}
	if e.Version() != 1 || e.Attempt() != 1 {
		t.Errorf("Version, Attempt = %d, %d, want 1, 1", e.Version(), e.Attempt())
	}
	if fs := e.FirstSeen(); fs.Before(before) || fs.After(after) {
		t.Errorf("FirstSeen %v is not between %v and %v", fs, before, after)
	}
	if fs := e.FirstSeen(); fs.Location() != time.UTC || fs.Nanosecond()%int(time.Millisecond) != 0 {
		t.Errorf("FirstSeen %v is not UTC to the millisecond", fs)
	}
	if !e.FirstSeenKnown() {
		t.Error("FirstSeenKnown = false for a built envelope")
	}
	if e.Type() != "" || e.CausationID() != "" || e.Origin() != "" || e.Error() != "" || e.Claim() != "" ||
		e.Route() != nil || e.RoutePosition() != 0 || e.RouteID() != "" {
		t.Errorf("unset fields are not empty: %+v", e.Fields())
	}
	if h := e.Headers(); h == nil || len(h) != 0 {
		t.Errorf("Headers() = %#v, want an empty non-nil map", h)
	}
	if other := mustEnvelope(t, acemq.Fields{}); other.ID() == e.ID() {
		t.Error("two envelopes got the same id")
	}
	// Correlation falls back to a given id too.
	if e := mustEnvelope(t, acemq.Fields{ID: "given"}); e.CorrelationID() != "given" {
		t.Errorf("CorrelationID = %q, want the given id", e.CorrelationID())
	}
}

func TestNewEnvelopeCorrectsCounters(t *testing.T) {
	for _, tc := range []struct{ in, want int }{
		{-5, 1}, {0, 1}, {1, 1}, {7, 7}, {math.MaxInt32, math.MaxInt32}, {math.MaxInt32 + 1, math.MaxInt32}, {math.MaxInt, math.MaxInt32}, {math.MinInt, 1},
	} {
		e := mustEnvelope(t, acemq.Fields{Version: tc.in, Attempt: tc.in})
		if e.Version() != tc.want || e.Attempt() != tc.want {
			t.Errorf("Version/Attempt %d → %d/%d, want %d", tc.in, e.Version(), e.Attempt(), tc.want)
		}
		if got := e.WithVersion(tc.in).Version(); got != tc.want {
			t.Errorf("WithVersion(%d) = %d, want %d", tc.in, got, tc.want)
		}
		if got := e.WithAttempt(tc.in).Attempt(); got != tc.want {
			t.Errorf("WithAttempt(%d) = %d, want %d", tc.in, got, tc.want)
		}
	}
	e := mustEnvelope(t, acemq.Fields{Route: []string{"a"}, RoutePosition: -3})
	if e.RoutePosition() != 0 {
		t.Errorf("RoutePosition -3 → %d, want 0", e.RoutePosition())
	}
}

func TestNewEnvelopeRoute(t *testing.T) {
	e := mustEnvelope(t, acemq.Fields{Route: []string{" validate ", "", "ship,  bill ", " "}, RoutePosition: 2, RouteID: "run"})
	if got, want := e.Route(), []string{"validate", "ship", "bill"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Route = %q, want %q", got, want)
	}
	if e.RoutePosition() != 2 || e.RouteID() != "run" {
		t.Errorf("position, id = %d, %q", e.RoutePosition(), e.RouteID())
	}
	// Without steps there is no route: position and run id go with it.
	e = mustEnvelope(t, acemq.Fields{Route: []string{" ", ","}, RoutePosition: 2, RouteID: "run"})
	if e.Route() != nil || e.RoutePosition() != 0 || e.RouteID() != "" {
		t.Errorf("an empty route kept position %d, id %q", e.RoutePosition(), e.RouteID())
	}
	if e := e.WithRoute(nil, 4, "x"); e.RoutePosition() != 0 || e.RouteID() != "" {
		t.Errorf("WithRoute(nil, 4, x) kept position %d, id %q", e.RoutePosition(), e.RouteID())
	}
}

// TestEnvelopeCopySemantics: nothing the caller holds shares storage with an
// envelope, at any depth.
func TestEnvelopeCopySemantics(t *testing.T) {
	f := populatedFields()
	e := mustEnvelope(t, f)
	want := e.Fields()

	// The Fields map and slice given to NewEnvelope.
	f.Headers["x-tenant"] = "evil"
	f.Headers["added"] = 1
	f.Headers["nested"].(map[string]any)["a"].([]any)[0] = "changed"
	f.Headers["raw"].([]byte)[0] = 'X'
	f.Route[0] = "changed"

	// The maps and slices handed out.
	h := e.Headers()
	h["x-tenant"] = "evil"
	h["nested"].(map[string]any)["a"].([]any)[1] = "changed"
	h["nested"].(map[string]any)["b"] = true
	h["raw"].([]byte)[1] = 'X'
	delete(h, "raw")
	v, _ := e.Header("nested")
	v.(map[string]any)["c"] = 1
	raw, _ := e.Header("raw")
	raw.([]byte)[2] = 'X'
	e.Route()[1] = "changed"
	got := e.Fields()
	got.Headers["x-tenant"] = "evil"
	got.Route[0] = "changed"

	// What AppendHeaders writes.
	w := e.AppendHeaders(nil, "rk")
	w["nested"].(map[string]any)["a"].([]any)[0] = "changed"
	w["raw"].([]byte)[0] = 'X'

	if now := e.Fields(); !reflect.DeepEqual(now, want) {
		t.Errorf("the envelope changed under the caller:\n got %#v\nwant %#v", now, want)
	}
	if string(want.Headers["raw"].([]byte)) != "bytes" || want.Headers["nested"].(map[string]any)["a"].([]any)[0] != int64(1) {
		t.Errorf("the envelope's own values changed: %#v", want.Headers)
	}

	// A copy made with With… does not share header storage with the original.
	c, err := e.WithHeader("x-more", "yes")
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := e.Header("x-more"); ok {
		t.Error("WithHeader changed the original")
	}
	c2, err := c.WithHeaders(map[string]any{"only": "this"})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := c.Header("only"); ok {
		t.Error("WithHeaders changed the original")
	}
	if h := c2.Headers(); len(h) != 1 || h["only"] != "this" {
		t.Errorf("WithHeaders replaced the headers with %v", h)
	}
}

// TestEnvelopeWithChangesOnlyItsField: every With… copy differs from the
// original in the field it names and nowhere else.
func TestEnvelopeWithChangesOnlyItsField(t *testing.T) {
	e := mustEnvelope(t, populatedFields())
	base := e.Fields()
	at := time.UnixMilli(1700000000123).UTC()
	withHeader := func(x acemq.Envelope) acemq.Envelope {
		c, err := x.WithHeader("x-new", "v")
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	withHeaders := func(x acemq.Envelope) acemq.Envelope {
		c, err := x.WithHeaders(map[string]any{"only": "this"})
		if err != nil {
			t.Fatal(err)
		}
		return c
	}
	for _, tc := range []struct {
		name   string
		with   func(acemq.Envelope) acemq.Envelope
		change func(*acemq.Fields)
	}{
		{"WithID", func(x acemq.Envelope) acemq.Envelope { return x.WithID("new-id") }, func(f *acemq.Fields) { f.ID = "new-id" }},
		{"WithType", func(x acemq.Envelope) acemq.Envelope { return x.WithType("order.shipped") }, func(f *acemq.Fields) { f.Type = "order.shipped" }},
		{"WithVersion", func(x acemq.Envelope) acemq.Envelope { return x.WithVersion(9) }, func(f *acemq.Fields) { f.Version = 9 }},
		{"WithCorrelationID", func(x acemq.Envelope) acemq.Envelope { return x.WithCorrelationID("c2") }, func(f *acemq.Fields) { f.CorrelationID = "c2" }},
		{"WithCorrelationID empty", func(x acemq.Envelope) acemq.Envelope { return x.WithCorrelationID("") }, func(f *acemq.Fields) { f.CorrelationID = f.ID }},
		{"WithCausationID", func(x acemq.Envelope) acemq.Envelope { return x.WithCausationID("k") }, func(f *acemq.Fields) { f.CausationID = "k" }},
		{"WithAttempt", func(x acemq.Envelope) acemq.Envelope { return x.WithAttempt(5) }, func(f *acemq.Fields) { f.Attempt = 5 }},
		{"Next", func(x acemq.Envelope) acemq.Envelope { return x.Next() }, func(f *acemq.Fields) { f.Attempt++ }},
		{"WithFirstSeen", func(x acemq.Envelope) acemq.Envelope { return x.WithFirstSeen(at) }, func(f *acemq.Fields) { f.FirstSeen = at }},
		{"WithOrigin", func(x acemq.Envelope) acemq.Envelope { return x.WithOrigin("o@h") }, func(f *acemq.Fields) { f.Origin = "o@h" }},
		{"WithError", func(x acemq.Envelope) acemq.Envelope { return x.WithError("") }, func(f *acemq.Fields) { f.Error = "" }},
		{"WithClaim", func(x acemq.Envelope) acemq.Envelope { return x.WithClaim("s3://x") }, func(f *acemq.Fields) { f.Claim = "s3://x" }},
		{"WithRoute", func(x acemq.Envelope) acemq.Envelope { return x.WithRoute([]string{"a", "b", "c"}, 2, "r2") }, func(f *acemq.Fields) {
			f.Route, f.RoutePosition, f.RouteID = []string{"a", "b", "c"}, 2, "r2"
		}},
		{"WithHeader", withHeader, func(f *acemq.Fields) { f.Headers["x-new"] = "v" }},
		{"WithHeaders", withHeaders, func(f *acemq.Fields) { f.Headers = map[string]any{"only": "this"} }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := e.Fields()
			tc.change(&want)
			if got := tc.with(e).Fields(); !reflect.DeepEqual(got, want) {
				t.Errorf("\n got %#v\nwant %#v", got, want)
			}
			if now := e.Fields(); !reflect.DeepEqual(now, base) {
				t.Errorf("the original changed: %#v", now)
			}
		})
	}
}

func TestEnvelopeDerive(t *testing.T) {
	e := mustEnvelope(t, populatedFields())
	d := e.Derive()
	if d.ID() == e.ID() || !uuidShape.MatchString(d.ID()) {
		t.Errorf("Derive kept the id or made a bad one: %q", d.ID())
	}
	if d.CorrelationID() != e.CorrelationID() || d.CausationID() != e.ID() {
		t.Errorf("Derive: correlation %q causation %q, want %q %q", d.CorrelationID(), d.CausationID(), e.CorrelationID(), e.ID())
	}
	if d.Attempt() != 1 || d.Type() != "" || len(d.Headers()) != 0 || d.Route() != nil || d.Error() != "" {
		t.Errorf("Derive carried fields of the cause: %#v", d.Fields())
	}
}

func TestReservedRefusal(t *testing.T) {
	h := map[string]any{
		"x-tenant":       "acme",
		"x-acemq-id":     "mine",
		"X-AceMQ-Type":   "mine",
		"x-acemq-zzz":    1,
		"acemq-reply-to": "q", // shared, not reserved
	}
	wantNames := []string{"X-AceMQ-Type", "x-acemq-id", "x-acemq-zzz"}
	wantMsg := "these header names belong to AceMQ and cannot be set by hand: X-AceMQ-Type, x-acemq-id, x-acemq-zzz"
	check := func(t *testing.T, err error, names []string, msg string) {
		t.Helper()
		var re *acemq.ReservedHeaderError
		if !errors.As(err, &re) {
			t.Fatalf("error %v is not a *ReservedHeaderError", err)
		}
		if !reflect.DeepEqual(re.Names, names) {
			t.Errorf("Names = %q, want %q", re.Names, names)
		}
		if err.Error() != msg {
			t.Errorf("Error() = %q, want %q", err.Error(), msg)
		}
	}
	t.Run("NewEnvelope", func(t *testing.T) {
		e, err := acemq.NewEnvelope(acemq.Fields{Headers: h})
		check(t, err, wantNames, wantMsg)
		if e.ID() != "" {
			t.Error("NewEnvelope returned an envelope along with the error")
		}
	})
	t.Run("WithHeaders", func(t *testing.T) {
		orig := mustEnvelope(t, acemq.Fields{Headers: map[string]any{"keep": 1}})
		e, err := orig.WithHeaders(h)
		check(t, err, wantNames, wantMsg)
		if !reflect.DeepEqual(e.Fields(), orig.Fields()) {
			t.Error("a refused WithHeaders changed the envelope")
		}
	})
	t.Run("WithHeader", func(t *testing.T) {
		orig := mustEnvelope(t, acemq.Fields{})
		for _, name := range []string{"x-acemq-id", "X-ACEMQ-ATTEMPT", "x-AceMq-anything"} {
			e, err := orig.WithHeader(name, "v")
			check(t, err, []string{name}, "these header names belong to AceMQ and cannot be set by hand: "+name)
			if len(e.Headers()) != 0 {
				t.Error("a refused WithHeader set the header")
			}
		}
	})
	t.Run("MustEnvelope", func(t *testing.T) {
		defer func() {
			if recover() == nil {
				t.Error("MustEnvelope did not panic on a reserved header")
			}
		}()
		acemq.MustEnvelope(acemq.Fields{Headers: map[string]any{"x-acemq-id": "x"}})
	})
}

func TestIsReserved(t *testing.T) {
	for name, want := range map[string]bool{
		"x-acemq-id":             true,
		"x-acemq-":               true,
		"X-ACEMQ-ID":             true,
		"X-Acemq-Route":          true,
		"x-AcEmQ-anything-new":   true,
		"x-acemq-replayed-at":    true,
		"x-acemq":                false,
		"x-acemqid":              false,
		"acemq-replayed-at":      false,
		"acemq-reply-to":         false,
		"x-tenant":               false,
		"":                       false,
		" x-acemq-id":            false,
		"xx-acemq-id":            false,
		"x_acemq_id":             false,
		"traceparent":            false,
		"x-death":                false,
		"x-acemq\u0130d-unicode": false, // a non-ASCII letter is not folded onto the prefix
	} {
		if got := acemq.IsReserved(name); got != want {
			t.Errorf("IsReserved(%q) = %v, want %v", name, got, want)
		}
	}
}

func TestEnvelopeAge(t *testing.T) {
	e := mustEnvelope(t, acemq.Fields{FirstSeen: time.Now().Add(-time.Hour)})
	age, ok := e.Age()
	if !ok || age < time.Hour {
		t.Errorf("Age = %v, %v, want at least 1h, true", age, ok)
	}
	// A first-seen in the future (a fast clock elsewhere) is age 0, known.
	e = mustEnvelope(t, acemq.Fields{FirstSeen: time.Now().Add(time.Hour)})
	if age, ok := e.Age(); !ok || age != 0 {
		t.Errorf("Age of a future first-seen = %v, %v, want 0, true", age, ok)
	}
	// Unknown: read without a first-seen header.
	before := time.Now().Truncate(time.Millisecond)
	r := acemq.ReadEnvelope(map[string]any{"x-acemq-id": "a"}, "rk", "")
	if age, ok := r.Age(); ok || age != 0 {
		t.Errorf("Age without first-seen = %v, %v, want 0, false", age, ok)
	}
	if r.FirstSeenKnown() {
		t.Error("FirstSeenKnown = true without a first-seen header")
	}
	if fs := r.FirstSeen(); fs.Before(before) || fs.After(time.Now()) {
		t.Errorf("FirstSeen of an unknown age is %v, want the moment of reading", fs)
	}
	// Next keeps the age unknown; WithFirstSeen makes it known.
	if _, ok := r.Next().Age(); ok {
		t.Error("Next made an unknown age known")
	}
	if _, ok := r.WithFirstSeen(time.Now()).Age(); !ok {
		t.Error("WithFirstSeen left the age unknown")
	}
	// The zero Envelope: unknown too.
	if _, ok := (acemq.Envelope{}).Age(); ok {
		t.Error("the zero Envelope has a known age")
	}
}

// TestZeroEnvelope: the zero value stands for "fresh defaults" wherever an
// envelope is taken.
func TestZeroEnvelope(t *testing.T) {
	var z acemq.Envelope
	h := z.AppendHeaders(nil, "")
	if id, _ := h["x-acemq-id"].(string); !uuidShape.MatchString(id) {
		t.Errorf("a zero envelope writes id %q", id)
	}
	if h["x-acemq-type"] != "message" {
		t.Errorf("type with no routing key = %v, want message", h["x-acemq-type"])
	}
	if e := z.WithType("t"); !uuidShape.MatchString(e.ID()) || e.Type() != "t" || e.Attempt() != 1 {
		t.Errorf("With… on the zero envelope: %#v", e.Fields())
	}
}
