package route

import (
	"errors"
	"strings"
	"testing"
	"time"
)

// The example of docs/wire.md §3.3, byte for byte.
const wireExample = `{"steps":[{"exchange":"shipping","routingKey":"order.ship","name":"ship"}],"done":[{"exchange":"orders","routingKey":"order.validate","name":"validate","completedAt":"2026-01-02T03:04:05Z"}]}`

func TestSlipWireExampleRoundTrips(t *testing.T) {
	s, err := ParseSlip([]byte(wireExample))
	if err != nil {
		t.Fatal(err)
	}
	want := Slip{
		Steps: []Stop{{Exchange: "shipping", RoutingKey: "order.ship", Name: "ship"}},
		Done:  []Stop{{Exchange: "orders", RoutingKey: "order.validate", Name: "validate", CompletedAt: time.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC)}},
	}
	if !slipEqual(s, want) {
		t.Fatalf("parsed %+v, want %+v", s, want)
	}
	if got := s.String(); got != wireExample {
		t.Fatalf("written\n%s\nwant\n%s", got, wireExample)
	}
}

func slipEqual(a, b Slip) bool {
	eq := func(x, y []Stop) bool {
		if len(x) != len(y) {
			return false
		}
		for i := range x {
			if x[i].Exchange != y[i].Exchange || x[i].RoutingKey != y[i].RoutingKey || x[i].Name != y[i].Name || !x[i].CompletedAt.Equal(y[i].CompletedAt) {
				return false
			}
		}
		return true
	}
	return eq(a.Steps, b.Steps) && eq(a.Done, b.Done)
}

func TestSlipWriting(t *testing.T) {
	cases := []struct {
		name string
		slip Slip
		want string
	}{
		{"name omitted when empty, done omitted while empty",
			NewSlip(Stop{Exchange: "orders", RoutingKey: "order.validate"}),
			`{"steps":[{"exchange":"orders","routingKey":"order.validate"}]}`},
		{"finished slip",
			Slip{Done: []Stop{{Exchange: "", RoutingKey: "q", CompletedAt: time.Date(2026, 1, 2, 3, 4, 5, 999_000_000, time.FixedZone("CET", 3600))}}},
			`{"steps":[],"done":[{"exchange":"","routingKey":"q","completedAt":"2026-01-02T02:04:05Z"}]}`},
		{"completedAt never on steps",
			NewSlip(Stop{Exchange: "x", RoutingKey: "k", CompletedAt: time.Now()}),
			`{"steps":[{"exchange":"x","routingKey":"k"}]}`},
		{"no HTML escaping",
			NewSlip(Stop{Exchange: "a<b>&c", RoutingKey: "\"q\"\n"}),
			`{"steps":[{"exchange":"a<b>&c","routingKey":"\"q\"\n"}]}`},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			if got := tc.slip.String(); got != tc.want {
				t.Fatalf("got  %s\nwant %s", got, tc.want)
			}
		})
	}
}

func TestSlipReadingIsForgiving(t *testing.T) {
	cases := map[string]string{
		"python microseconds and +00:00": `{"steps": [{"exchange": "shipping", "routingKey": "order.ship", "name": "ship"}], "done": [{"exchange": "orders", "routingKey": "order.validate", "name": "validate", "completedAt": "2026-01-02T03:04:05.123456+00:00"}]}`,
		"key order and whitespace":       "{\n \"done\" : [ {\"completedAt\":\"2026-01-02T03:04:05Z\", \"name\":\"validate\", \"routingKey\":\"order.validate\", \"exchange\":\"orders\"} ],\n \"steps\" : [ {\"name\":\"ship\",\"routingKey\":\"order.ship\",\"exchange\":\"shipping\"} ] }",
		"milliseconds Z":                 `{"steps":[{"exchange":"shipping","routingKey":"order.ship","name":"ship"}],"done":[{"exchange":"orders","routingKey":"order.validate","name":"validate","completedAt":"2026-01-02T03:04:05.678Z"}]}`,
		"another offset":                 `{"steps":[{"exchange":"shipping","routingKey":"order.ship","name":"ship"}],"done":[{"exchange":"orders","routingKey":"order.validate","name":"validate","completedAt":"2026-01-02T04:04:05+01:00"}]}`,
		"no zone":                        `{"steps":[{"exchange":"shipping","routingKey":"order.ship","name":"ship"}],"done":[{"exchange":"orders","routingKey":"order.validate","name":"validate","completedAt":"2026-01-02T03:04:05.5"}]}`,
		"unknown fields and nulls":       `{"v":2,"steps":[{"exchange":"shipping","routingKey":"order.ship","name":"ship","extra":{"a":1}}],"done":[{"exchange":"orders","routingKey":"order.validate","name":"validate","completedAt":"2026-01-02T03:04:05Z","by":null}]}`,
	}
	for name, in := range cases {
		t.Run(name, func(t *testing.T) {
			s, err := ParseSlip([]byte(in))
			if err != nil {
				t.Fatal(err)
			}
			// Every form is rewritten in the family's form, to the second.
			if got := s.String(); got != wireExample {
				t.Fatalf("rewritten as\n%s\nwant\n%s", got, wireExample)
			}
		})
	}
}

func TestSlipReadingRefusesNonsense(t *testing.T) {
	for _, in := range []string{
		``, `null`, `[]`, `{}`, `"steps"`, `{"steps":null}`, `{"steps":{}}`, `{"steps":[1]}`,
		`{"steps":[{"exchange":5}]}`, `{"steps":[{"routingKey":true}]}`, `{"steps":[],"done":[{"completedAt":"yesterday"}]}`,
		`{"steps":[],"done":[{"completedAt":12}]}`, `{"steps":[]} trailing`, `{"steps":[],"done":{}}`,
		`{"steps":[],"done":[{"completedAt":"9999-12-31T23:00:00-05:00"}]}`,
	} {
		_, err := ParseSlip([]byte(in))
		if !errors.Is(err, ErrInvalidSlip) {
			t.Errorf("ParseSlip(%q) = %v, want ErrInvalidSlip", in, err)
		}
	}
}

func TestSlipAdvance(t *testing.T) {
	s := NewSlip(
		Stop{Exchange: "orders", RoutingKey: "order.validate", Name: "validate"},
		Stop{Exchange: "shipping", RoutingKey: "order.ship", Name: "ship"},
	)
	at := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
	n := s.Advance(at)
	if n.String() != wireExample {
		t.Fatalf("advanced to\n%s\nwant\n%s", n, wireExample)
	}
	if len(s.Steps) != 2 || len(s.Done) != 0 {
		t.Fatal("Advance changed its receiver")
	}
	cur, ok := n.Current()
	if !ok || cur.Name != "ship" || n.Finished() {
		t.Fatalf("current %+v, %t", cur, ok)
	}
	end := n.Advance(at)
	if !end.Finished() || len(end.Done) != 2 {
		t.Fatalf("after the last stop: %s", end)
	}
	if again := end.Advance(at); again.String() != end.String() {
		t.Fatal("advancing a finished slip changed it")
	}
	if _, ok := end.Current(); ok {
		t.Fatal("a finished slip has a current stop")
	}
}

func TestStepNames(t *testing.T) {
	for _, n := range []string{"a", "validate", "order.ship", "step-2", "A1.b-c"} {
		if !ValidStepName(n) {
			t.Errorf("ValidStepName(%q) = false", n)
		}
	}
	for _, n := range []string{"", "-a", ".a", "a,b", "a b", "a_b", "a/b", "é"} {
		if ValidStepName(n) {
			t.Errorf("ValidStepName(%q) = true", n)
		}
	}
}

func FuzzParseSlip(f *testing.F) {
	for _, s := range []string{
		wireExample,
		`{"steps":[]}`,
		`{"steps":[{"exchange":"","routingKey":"q"}]}`,
		`{"steps": [{"exchange": "a", "routingKey": "b"}], "done": [{"exchange": "c", "routingKey": "d", "completedAt": "2026-01-02T03:04:05.123456+00:00"}]}`,
		`{"steps":[],"done":[{"completedAt":"2026-01-02T03:04:05"}]}`,
		`{"steps":null}`, `null`, `{`, `[]`, `{"steps":[{"exchange":"\u003c\ud83d\ude00"}]}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		s, err := ParseSlip(data)
		if err != nil {
			if !errors.Is(err, ErrInvalidSlip) {
				t.Fatalf("error %v does not wrap ErrInvalidSlip", err)
			}
			return
		}
		// What is read can be written, and what is written reads back the same.
		w1 := s.String()
		s2, err := ParseSlip([]byte(w1))
		if err != nil {
			t.Fatalf("re-reading %s: %v", w1, err)
		}
		if w2 := s2.String(); w1 != w2 {
			t.Fatalf("not stable:\n%s\n%s", w1, w2)
		}
		if strings.Contains(w1, "\n") {
			t.Fatalf("not compact: %q", w1)
		}
		_ = s.Advance(time.Now())
	})
}
