package replay

import (
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/wire"
)

func TestTarget(t *testing.T) {
	for in, want := range map[string]string{
		"orders.new.dlq":        "orders.new",
		"orders.new.parked":     "orders.new",
		"fulfilment.charge.dlq": "fulfilment.charge",
		"a.dlq.parked":          "a.dlq",
	} {
		if got, ok := Target(in); !ok || got != want {
			t.Errorf("Target(%q) = %q, %t; want %q", in, got, ok, want)
		}
	}
	for _, in := range []string{"orders.new", ".dlq", ".parked", "dlq", "orders.dlqx", ""} {
		if got, ok := Target(in); ok {
			t.Errorf("Target(%q) = %q, want none", in, got)
		}
	}
}

func stampOf(t *testing.T, headers map[string]any, opts ...Option) map[string]any {
	t.Helper()
	cfg := config{now: func() time.Time { return time.Date(2026, 2, 3, 4, 5, 6, 789_123_000, time.FixedZone("X", -3600)) }, routingKey: "q"}
	for _, o := range opts {
		o.apply(&cfg)
	}
	out, err := cfg.stamp(acemq.ReadEnvelope(headers, "q.dlq", "m-1"), "q.dlq")
	if err != nil {
		t.Fatal(err)
	}
	return out.AppendHeaders(nil, cfg.routingKey)
}

func TestReplayCount(t *testing.T) {
	cases := []struct {
		name    string
		headers map[string]any
		want    any
	}{
		{"first replay", map[string]any{}, int32(1)},
		{"int32", map[string]any{"acemq-replay-count": int32(2)}, int32(3)},
		{"int8", map[string]any{"acemq-replay-count": int8(2)}, int32(3)},
		{"int64", map[string]any{"acemq-replay-count": int64(5)}, int32(6)},
		{"uint16", map[string]any{"acemq-replay-count": uint16(5)}, int32(6)},
		{"decimal string", map[string]any{"acemq-replay-count": "4"}, int32(5)},
		{"bytes", map[string]any{"acemq-replay-count": []byte("4")}, int32(5)},
		{"whole float", map[string]any{"acemq-replay-count": float64(2)}, int32(3)},
		{"legacy only", map[string]any{"x-acemq-replay-count": int64(7)}, int32(8)},
		{"unprefixed wins", map[string]any{"acemq-replay-count": int32(2), "x-acemq-replay-count": int64(7)}, int32(3)},
		{"unreadable", map[string]any{"acemq-replay-count": true}, int32(1)},
		{"past 32 bits", map[string]any{"acemq-replay-count": int64(1 << 31)}, int64(1<<31 + 1)},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			h := stampOf(t, tc.headers)
			if got := h["acemq-replay-count"]; got != tc.want {
				t.Fatalf("acemq-replay-count = %#v, want %#v", got, tc.want)
			}
			if _, ok := tc.headers["x-acemq-replay-count"]; ok && h["x-acemq-replay-count"] != tc.headers["x-acemq-replay-count"] {
				t.Fatal("the legacy count was not carried through unchanged")
			}
		})
	}
}

func TestStamps(t *testing.T) {
	h := stampOf(t, map[string]any{
		wire.HeaderID:        "m-1",
		wire.HeaderType:      "order.placed",
		wire.HeaderAttempt:   int32(4),
		wire.HeaderError:     "exhausted 4 attempts: boom",
		wire.HeaderFirstSeen: int64(1767323045678),
		"acemq-replayed-at":  "2020-01-01T00:00:00Z",
		"x-acemq-future":     "kept",
		"x-tenant":           "acme",
	})
	if h["acemq-replayed-at"] != "2026-02-03T05:05:06.789Z" {
		t.Fatalf("acemq-replayed-at = %v", h["acemq-replayed-at"])
	}
	if h["acemq-replayed-from"] != "q.dlq" || h[wire.HeaderAttempt] != int32(1) || h[wire.HeaderFirstSeen] != int64(1767323045678) {
		t.Fatalf("headers %v", h)
	}
	if _, ok := h[wire.HeaderError]; ok {
		t.Fatal("x-acemq-error was kept")
	}
	if h["x-acemq-future"] != "kept" || h["x-tenant"] != "acme" || h[wire.HeaderType] != "order.placed" {
		t.Fatalf("headers not carried: %v", h)
	}
	if k := stampOf(t, map[string]any{wire.HeaderAttempt: int32(4)}, WithKeptAttempts()); k[wire.HeaderAttempt] != int32(4) {
		t.Fatalf("WithKeptAttempts: attempt %v", k[wire.HeaderAttempt])
	}
	// That a message that never had a type gets the target's routing key,
	// not the dead-letter queue's, is the Browser's Move rule: tested there
	// and end to end in TestReplayUntypedMessage.
}
