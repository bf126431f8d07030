package acemq_test

import (
	"errors"
	"maps"
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

// change is Envelope.Change, failing the test on an error.
func change(t testing.TB, e acemq.Envelope, f func(*acemq.Fields)) acemq.Envelope {
	t.Helper()
	c, err := e.Change(f)
	if err != nil {
		t.Fatalf("Change: %v", err)
	}
	return c
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
		Reason:        "the handler rejected it: boom",
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
	if e.Type() != "" || e.CausationID() != "" || e.Origin() != "" || e.Reason() != "" || e.Claim() != "" ||
		e.Fields().Route != nil || e.Fields().RoutePosition != 0 || e.Fields().RouteID != "" {
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
		c := change(t, e, func(f *acemq.Fields) { f.Version, f.Attempt = tc.in, tc.in })
		if c.Version() != tc.want || c.Attempt() != tc.want {
			t.Errorf("Change to version/attempt %d → %d/%d, want %d", tc.in, c.Version(), c.Attempt(), tc.want)
		}
	}
	e := mustEnvelope(t, acemq.Fields{Route: []string{"a"}, RoutePosition: -3})
	if e.Fields().RoutePosition != 0 {
		t.Errorf("RoutePosition -3 → %d, want 0", e.Fields().RoutePosition)
	}
}

func TestNewEnvelopeRoute(t *testing.T) {
	e := mustEnvelope(t, acemq.Fields{Route: []string{" validate ", "", "ship,  bill ", " "}, RoutePosition: 2, RouteID: "run"})
	if got, want := e.Fields().Route, []string{"validate", "ship", "bill"}; !reflect.DeepEqual(got, want) {
		t.Errorf("Route = %q, want %q", got, want)
	}
	if e.Fields().RoutePosition != 2 || e.Fields().RouteID != "run" {
		t.Errorf("position, id = %d, %q", e.Fields().RoutePosition, e.Fields().RouteID)
	}
	// Without steps there is no route: position and run id go with it.
	e = mustEnvelope(t, acemq.Fields{Route: []string{" ", ","}, RoutePosition: 2, RouteID: "run"})
	if e.Fields().Route != nil || e.Fields().RoutePosition != 0 || e.Fields().RouteID != "" {
		t.Errorf("an empty route kept position %d, id %q", e.Fields().RoutePosition, e.Fields().RouteID)
	}
	if e := mustEnvelope(t, acemq.Fields{RoutePosition: 3, RouteID: "run"}); e.Fields().Route != nil || e.Fields().RoutePosition != 0 || e.Fields().RouteID != "" {
		t.Errorf("no route kept position %d, id %q", e.Fields().RoutePosition, e.Fields().RouteID)
	}
	if e := change(t, e, func(f *acemq.Fields) { f.Route, f.RoutePosition, f.RouteID = nil, 4, "x" }); e.Fields().RoutePosition != 0 || e.Fields().RouteID != "" {
		t.Errorf("Change to route nil, 4, x kept position %d, id %q", e.Fields().RoutePosition, e.Fields().RouteID)
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
	e.Fields().Route[1] = "changed"
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

	// A copy made with Change does not share header storage with the
	// original, and the map Change hands f is not kept.
	var given map[string]any
	c := change(t, e, func(f *acemq.Fields) {
		f.Headers["x-more"] = "yes"
		f.Headers["nested"].(map[string]any)["a"].([]any)[0] = "changed"
		given = f.Headers
	})
	given["x-more"] = "later"
	if _, ok := e.Header("x-more"); ok {
		t.Error("Change changed the original")
	}
	if v, _ := c.Header("x-more"); v != "yes" {
		t.Errorf("the changed copy shares the map given to f: x-more = %v", v)
	}
	if now := e.Fields(); !reflect.DeepEqual(now, want) {
		t.Errorf("Change changed the original's nested values:\n got %#v\nwant %#v", now, want)
	}
	c2 := change(t, c, func(f *acemq.Fields) { f.Headers = map[string]any{"only": "this"} })
	if _, ok := c.Header("only"); ok {
		t.Error("Change changed the original")
	}
	if h := c2.Headers(); len(h) != 1 || h["only"] != "this" {
		t.Errorf("Change replaced the headers with %v", h)
	}
}

// TestEnvelopeChangeChangesOnlyWhatItSets: a copy made with Change differs
// from the original in the fields f sets and nowhere else, and the defaults
// apply again.
func TestEnvelopeChangeChangesOnlyWhatItSets(t *testing.T) {
	e := mustEnvelope(t, populatedFields())
	base := e.Fields()
	at := time.UnixMilli(1700000000123).UTC()
	for _, tc := range []struct {
		name   string
		change func(*acemq.Fields) // what Change is given
		want   func(*acemq.Fields) // what the fields become
	}{
		{"ID", func(f *acemq.Fields) { f.ID = "new-id" }, nil},
		{"emptied ID", func(f *acemq.Fields) { f.ID = "" }, func(f *acemq.Fields) { f.ID = "fresh" }},
		{"Type", func(f *acemq.Fields) { f.Type = "order.shipped" }, nil},
		{"Version", func(f *acemq.Fields) { f.Version = 9 }, nil},
		{"Version below 1", func(f *acemq.Fields) { f.Version = -2 }, func(f *acemq.Fields) { f.Version = 1 }},
		{"CorrelationID", func(f *acemq.Fields) { f.CorrelationID = "c2" }, nil},
		{"emptied CorrelationID", func(f *acemq.Fields) { f.CorrelationID = "" }, func(f *acemq.Fields) { f.CorrelationID = f.ID }},
		{"CausationID", func(f *acemq.Fields) { f.CausationID = "k" }, nil},
		{"Attempt", func(f *acemq.Fields) { f.Attempt = 5 }, nil},
		{"FirstSeen", func(f *acemq.Fields) { f.FirstSeen = at }, nil},
		{"Origin", func(f *acemq.Fields) { f.Origin = "o@h" }, nil},
		{"Reason", func(f *acemq.Fields) { f.Reason = "" }, nil},
		{"Claim", func(f *acemq.Fields) { f.Claim = "s3://x" }, nil},
		{"Route", func(f *acemq.Fields) { f.Route, f.RoutePosition, f.RouteID = []string{"a", "b", "c"}, 2, "r2" }, nil},
		{"one header", func(f *acemq.Fields) { f.Headers["x-new"] = "v" }, nil},
		{"all headers", func(f *acemq.Fields) { f.Headers = map[string]any{"only": "this"} }, nil},
		{"a Go int header", func(f *acemq.Fields) { f.Headers["n"] = 7 }, func(f *acemq.Fields) { f.Headers["n"] = int64(7) }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			want := e.Fields()
			tc.change(&want)
			if tc.want != nil {
				tc.want(&want)
			}
			got := change(t, e, tc.change).Fields()
			if want.ID == "fresh" {
				if got.ID == e.ID() || !uuidShape.MatchString(got.ID) {
					t.Errorf("an emptied id became %q, want a fresh UUID", got.ID)
				}
				want.ID, want.CorrelationID = got.ID, got.CorrelationID
				if got.CorrelationID != base.CorrelationID {
					t.Errorf("the correlation changed with the id: %q", got.CorrelationID)
				}
			}
			if !reflect.DeepEqual(got, want) {
				t.Errorf("\n got %#v\nwant %#v", got, want)
			}
			if now := e.Fields(); !reflect.DeepEqual(now, base) {
				t.Errorf("the original changed: %#v", now)
			}
		})
	}
}

// TestReadEnvelopeLetterCase: only the canonical lower-case names of the
// known headers become fields. The same name in another letter case is
// reserved all the same: kept out of the application headers, kept aside
// and written back as received, never read as the field.
func TestReadEnvelopeLetterCase(t *testing.T) {
	e := acemq.ReadEnvelope(map[string]any{
		"x-acemq-id": "a", "X-ACEMQ-ATTEMPT": int32(5), "X-AceMQ-Type": "loud",
		"x-tenant": "acme", "X-Tenant": "other",
	}, "rk", "")
	if e.Attempt() != 1 || e.Type() != "rk" {
		t.Errorf("attempt %d, type %q: a known header in another letter case was read as the field", e.Attempt(), e.Type())
	}
	if got := e.Headers(); len(got) != 2 || got["x-tenant"] != "acme" || got["X-Tenant"] != "other" {
		t.Errorf("application headers %v, want x-tenant and X-Tenant only", got)
	}
	if got := e.UnknownReserved(); len(got) != 2 || got["X-ACEMQ-ATTEMPT"] != int32(5) || got["X-AceMQ-Type"] != "loud" {
		t.Errorf("reserved headers kept aside %v, want X-ACEMQ-ATTEMPT and X-AceMQ-Type as received", got)
	}
	h := e.AppendHeaders(nil, "rk")
	if h["X-ACEMQ-ATTEMPT"] != int32(5) || h["x-acemq-attempt"] != int32(1) {
		t.Errorf("written back: X-ACEMQ-ATTEMPT %v, x-acemq-attempt %v; want 5 as received and 1", h["X-ACEMQ-ATTEMPT"], h["x-acemq-attempt"])
	}
}

// TestEnvelopeChangeKeepsWhatFieldsDoNotHold: the unknown reserved headers
// a read envelope carries and an unknown age survive a Change.
func TestEnvelopeChangeKeepsWhatFieldsDoNotHold(t *testing.T) {
	r := acemq.ReadEnvelope(map[string]any{"x-acemq-id": "a", "x-acemq-future": "v1"}, "rk", "")
	c := change(t, r, func(f *acemq.Fields) { f.Attempt = 3 })
	if got := c.UnknownReserved(); got["x-acemq-future"] != "v1" {
		t.Errorf("Change dropped the unknown reserved headers: %v", got)
	}
	if _, known := c.Age(); known {
		t.Error("Change made an unknown age known")
	}
	if _, known := change(t, r, func(f *acemq.Fields) { f.FirstSeen = time.Now() }).Age(); !known {
		t.Error("a Change of FirstSeen left the age unknown")
	}
	if _, err := r.Change(func(f *acemq.Fields) { f.Headers["x-acemq-id"] = "mine" }); err == nil {
		t.Error("Change accepted a reserved header name")
	}
	if _, err := r.Change(func(f *acemq.Fields) { f.Headers["ch"] = make(chan int) }); err == nil {
		t.Error("Change accepted a header value AMQP cannot carry")
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
	if d.Attempt() != 1 || d.Type() != "" || len(d.Headers()) != 0 || d.Fields().Route != nil || d.Reason() != "" {
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
	t.Run("Change", func(t *testing.T) {
		orig := mustEnvelope(t, acemq.Fields{Headers: map[string]any{"keep": int64(1)}})
		e, err := orig.Change(func(f *acemq.Fields) { f.Headers = h })
		check(t, err, wantNames, wantMsg)
		if !reflect.DeepEqual(e.Fields(), orig.Fields()) {
			t.Error("a refused Change changed the envelope")
		}
		for _, name := range []string{"x-acemq-id", "X-ACEMQ-ATTEMPT", "x-AceMq-anything"} {
			e, err := orig.Change(func(f *acemq.Fields) { f.Headers[name] = "v" })
			check(t, err, []string{name}, "these header names belong to AceMQ and cannot be set by hand: "+name)
			if len(e.Headers()) != 1 {
				t.Error("a refused Change set the header")
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
	// Next keeps the age unknown; a new first-seen makes it known.
	if _, ok := r.Next().Age(); ok {
		t.Error("Next made an unknown age known")
	}
	if _, ok := change(t, r, func(f *acemq.Fields) { f.FirstSeen = time.Now() }).Age(); !ok {
		t.Error("Change of FirstSeen left the age unknown")
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
	if e := change(t, z, func(f *acemq.Fields) { f.Type = "t" }); !uuidShape.MatchString(e.ID()) || e.Type() != "t" || e.Attempt() != 1 || e.CorrelationID() != e.ID() {
		t.Errorf("Change on the zero envelope: %#v", e.Fields())
	}
}

// The common header values (strings, int32, int64, bools) are kept as
// they are, and a bad value beside them is still refused, naming its
// header.
func TestNewEnvelopeCommonHeaderValues(t *testing.T) {
	common := map[string]any{"s": "text", "i32": int32(-7), "i64": int64(1) << 40, "flag": true}
	e := mustEnvelope(t, acemq.Fields{Headers: common})
	if got := e.Headers(); !reflect.DeepEqual(got, common) {
		t.Errorf("Headers() = %#v, want %#v", got, common)
	}
	for _, bad := range []any{make(chan int), uint64(math.MaxUint64), struct{}{}} {
		h := map[string]any{"bad": bad}
		maps.Copy(h, common)
		_, err := acemq.NewEnvelope(acemq.Fields{Headers: h})
		var he *acemq.HeaderValueError
		if !errors.As(err, &he) || he.Name != "bad" {
			t.Errorf("with a %T beside the common values: %v, want a *HeaderValueError naming bad", bad, err)
		}
	}
}
