package acemq

import (
	"maps"
	"testing"
)

// A publisher's headers are the same table AppendHeaders writes, message
// after message, whether its values repeat (their boxes shared) or change
// (type, correlation, causation, origin each in turn).
func TestHeaderBoxesWriteWhatAppendHeadersWrites(t *testing.T) {
	var boxes headerBoxes
	base := Fields{Type: "order.created", CorrelationID: "corr-1", CausationID: "cause-1", Origin: "svc@host", Headers: map[string]any{"tenant": "acme"}}
	steps := []func(*Fields){
		func(*Fields) {},
		func(*Fields) {}, // the same again: every box reused
		func(f *Fields) { f.Type = "order.shipped" },
		func(f *Fields) { f.CorrelationID = "corr-2" },
		func(f *Fields) { f.CausationID = "cause-2" },
		func(f *Fields) { f.Origin = "other@host" },
		func(f *Fields) { f.Type, f.CorrelationID, f.CausationID = "", "", "" }, // routing-key type, id correlation, no causation
		func(f *Fields) { f.Type = "order.created" },
	}
	f := base
	for i, step := range steps {
		step(&f)
		env := MustEnvelope(f)
		want := env.AppendHeaders(nil, "orders")
		got := env.appendHeaders(nil, "orders", &boxes)
		if !maps.Equal(got, want) {
			t.Fatalf("step %d: boxed headers\n%v\nwant\n%v", i, got, want)
		}
	}
}

// Values that repeat are boxed once per publisher: the four string
// headers of a full envelope (type, correlation, causation, origin) cost
// no allocation after the first message.
func TestHeaderBoxesSaveAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not exact under -race")
	}
	env := MustEnvelope(Fields{Type: "order.created", CorrelationID: "corr-1", CausationID: "cause-1", Origin: "svc@host"})
	var boxes headerBoxes
	plain := testing.AllocsPerRun(500, func() { _ = env.AppendHeaders(nil, "orders") })
	boxed := testing.AllocsPerRun(500, func() { _ = env.appendHeaders(nil, "orders", &boxes) })
	if plain-boxed != 4 {
		t.Errorf("boxed headers: %v allocations, plain %v: want 4 fewer", boxed, plain)
	}
}
