package outbox_test

import (
	"testing"

	"github.com/acemq/acemq/internal/storetest"
	"github.com/acemq/acemq/outbox"
)

// Every AMQP field type comes back with its type (docs/wire.md §13 #38).
func TestHeadersKeepTheirTypes(t *testing.T) {
	want := storetest.AllHeaderTypes()
	b, err := outbox.MarshalHeaders(want)
	if err != nil {
		t.Fatal(err)
	}
	got, err := outbox.UnmarshalHeaders(b)
	if err != nil {
		t.Fatal(err)
	}
	if msg := storetest.DiffValue(map[string]any(got), map[string]any(want)); msg != "" {
		t.Fatalf("round trip: %s\nstored as %s", msg, b)
	}
	if _, err := outbox.MarshalHeaders(map[string]any{"c": make(chan int)}); err == nil {
		t.Error("a channel was stored as a header")
	}
	for _, bad := range []string{`null`, `[]`, `{"a":1}`, `{"a":{"t":"int8","v":"300"}}`, `{"a":{"t":"mystery","v":"1"}}`, `{"a":{"t":"decimal","v":"x"}}`} {
		if _, err := outbox.UnmarshalHeaders([]byte(bad)); err == nil {
			t.Errorf("%s was read without an error", bad)
		}
	}
}

// The stored form is read from database rows: whatever it holds, reading
// must not panic, and what reads must write back to the same value.
func FuzzUnmarshalHeaders(f *testing.F) {
	b, _ := outbox.MarshalHeaders(storetest.AllHeaderTypes())
	f.Add(b)
	f.Add([]byte(`{"a":{"t":"array","v":[{"t":"table","v":{}}]}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		h, err := outbox.UnmarshalHeaders(data)
		if err != nil {
			return
		}
		again, err := outbox.MarshalHeaders(h)
		if err != nil {
			t.Fatalf("a table read back cannot be written: %v", err)
		}
		h2, err := outbox.UnmarshalHeaders(again)
		if err != nil {
			t.Fatalf("rewritten form unreadable: %v", err)
		}
		if msg := storetest.DiffValue(map[string]any(h2), map[string]any(h)); msg != "" && len(h) > 0 {
			t.Fatalf("round trip changed the table: %s", msg)
		}
	})
}
