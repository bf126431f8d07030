package acemq

import (
	"maps"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/engine"
)

// The envelope writer the packages built on acemq publish through (rpc)
// writes the table AppendHeaders writes, with its size byte for byte (0
// when a value is not a flat scalar), and boxes the values that repeat
// once per writer.
func TestEnvelopeWriter(t *testing.T) {
	eng := engine.NewConn(nil, nil, nil, newEnvelopeWriter)
	w := engine.NewEnvelopeWriter[Envelope](eng)
	if w == nil {
		t.Fatal("no envelope writer for acemq.Envelope")
	}
	if engine.NewEnvelopeWriter[string](eng) != nil {
		t.Fatal("an envelope writer for a type acemq does not write")
	}
	full := MustEnvelope(Fields{
		Type: "order.created", Version: 3, CorrelationID: "corr-1", CausationID: "cause-1", Origin: "svc@host",
		Headers: map[string]any{"acemq-reply-to": "acemq-reply-1", "n": 7, "when": time.Unix(1700000000, 0)},
	})
	for name, env := range map[string]Envelope{
		"fresh":     MustEnvelope(Fields{Origin: "svc@host"}),
		"full":      full,
		"read back": ReadEnvelope(full.AppendHeaders(nil, "orders"), "orders", ""),
	} {
		for range 2 { // the second time through boxes already holding the values
			got, size := w.WriteHeaders(env, "orders")
			if want := env.AppendHeaders(nil, "orders"); !maps.Equal(got, want) {
				t.Fatalf("%s: the writer wrote\n%v\nAppendHeaders writes\n%v", name, got, want)
			}
			if want := len(encodeTable(t, got)); size != want {
				t.Errorf("%s: size %d, the table encodes in %d bytes", name, size, want)
			}
		}
	}
	// The zero Envelope is written as a fresh one.
	if got, size := w.WriteHeaders(Envelope{}, "orders"); got["x-acemq-id"] == "" || got["x-acemq-type"] != "orders" || size != len(encodeTable(t, got)) {
		t.Errorf("the zero Envelope: %v, size %d", got, size)
	}
	nested := MustEnvelope(Fields{Headers: map[string]any{"h": map[string]any{"k": "v"}}})
	if got, size := w.WriteHeaders(nested, "orders"); size != 0 || len(got) != len(nested.AppendHeaders(nil, "orders")) {
		t.Errorf("with a nested table: %v, size %d, want 0", got, size)
	}
}

// A writer boxes the type, correlation, causation and origin once: they
// cost no allocation after the first message, as a publisher's do.
func TestEnvelopeWriterSavesAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("allocation counts are not exact under -race")
	}
	w := engine.NewEnvelopeWriter[Envelope](engine.NewConn(nil, nil, nil, newEnvelopeWriter))
	env := MustEnvelope(Fields{Type: "order.created", CorrelationID: "corr-1", CausationID: "cause-1", Origin: "svc@host"})
	plain := testing.AllocsPerRun(500, func() { _ = env.AppendHeaders(nil, "orders") })
	written := testing.AllocsPerRun(500, func() { _, _ = w.WriteHeaders(env, "orders") })
	if plain-written != 4 {
		t.Errorf("written headers: %v allocations, AppendHeaders %v: want 4 fewer", written, plain)
	}
}
