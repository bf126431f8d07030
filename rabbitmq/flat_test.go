package rabbitmq

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestFlatTableIsTheLongWayInOneWalk: for the tables flatTable takes, the
// table and size are what toAMQPTable and tableSize give; every other
// table it leaves to them, so that their conversions and refusals apply.
func TestFlatTableIsTheLongWayInOneWalk(t *testing.T) {
	now := time.UnixMilli(1767323045678)
	flat := []driver.Table{
		nil,
		{},
		{"x-acemq-id": "6f1c2a3b-0000-4000-8000-000000000001", "x-acemq-version": int32(2), "x-acemq-first-seen": int64(1767323045678)},
		{"a": nil, "b": true, "c": uint8(1), "d": int8(-1), "e": int16(2), "f": uint16(3), "g": 4, "h": uint32(5),
			"i": now, "j": float32(1.5), "k": 2.5, "l": []byte("xy"), "m": amqp.Decimal{Scale: 2, Value: 314}, "n": ""},
		{strings.Repeat("k", 255): "v"},
	}
	for _, tab := range flat {
		at, size, ok := flatTable(tab)
		if !ok {
			t.Errorf("flatTable(%v) refused a flat table of scalars", tab)
			continue
		}
		want, err := toAMQPTable(tab)
		if err != nil {
			t.Fatal(err)
		}
		if len(at) != len(want) || (tab == nil) != (at == nil) {
			t.Errorf("flatTable(%v) = %v, toAMQPTable %v", tab, at, want)
		}
		wantSize, err := tableSize(want, 0)
		if err != nil || size != wantSize {
			t.Errorf("flatTable(%v) size %d, tableSize %d (%v)", tab, size, wantSize, err)
		}
	}
	many := driver.Table{}
	for i := range maxContainerElements + 1 {
		many[strings.Repeat("k", i%200)+string(rune('a'+i%26))+time.Duration(i).String()] = int32(i)
	}
	for name, tab := range map[string]driver.Table{
		"a nested table":        {"t": amqp.Table{"a": 1}},
		"a driver table":        {"t": driver.Table{"a": 1}},
		"an array":              {"a": []any{1}},
		"a driver decimal":      {"d": driver.Decimal{Scale: 1, Value: 1}},
		"a uint64":              {"u": uint64(1)},
		"a uint":                {"u": uint(1)},
		"an unsupported type":   {"s": struct{}{}},
		"a NaN":                 {"f": math.NaN()},
		"an infinite float32":   {"f": float32(math.Inf(1))},
		"a name of 256 bytes":   {strings.Repeat("k", 256): "v"},
		"more than 8192 values": many,
	} {
		if _, _, ok := flatTable(tab); ok {
			t.Errorf("flatTable took %s", name)
		}
	}
	// The refusals still come from the long way.
	pub := amqp.Publishing{Headers: amqp.Table{"f": math.NaN()}}
	if err := checkSendableSized(&pub, 0, -1); err == nil {
		t.Error("a NaN header passed checkSendable")
	}
	// A known size counts against the frame as the walked one does.
	pub = amqp.Publishing{Headers: amqp.Table{"s": strings.Repeat("v", 200)}}
	_, size, _ := flatTable(driver.Table(pub.Headers))
	for _, frameMax := range []int{100, 4096} {
		if (checkSendableSized(&pub, frameMax, size) == nil) != (checkSendable(&pub, frameMax) == nil) {
			t.Errorf("frame %d: the sized and the walked check disagree", frameMax)
		}
	}
}

func BenchmarkHeadersForPublish(b *testing.B) {
	h := driver.Table{"x-acemq-id": "6f1c2a3b-0000-4000-8000-000000000001", "x-acemq-type": "order.created", "x-acemq-version": int32(2),
		"x-acemq-correlation": "corr-3b2f6c1d-8e4a-4f7b-9c0d-1a2b3c4d5e6f", "x-acemq-attempt": int32(1), "x-acemq-first-seen": int64(1767323045678),
		"x-acemq-causation": "cause-9d8c7b6a-5f4e-4d3c-2b1a-0f9e8d7c6b5a", "x-acemq-origin": "perf@bench", "tenant": "acme", "priority": int32(5)}
	b.Run("two-walks", func(b *testing.B) {
		for b.Loop() {
			at, _ := toAMQPTable(h)
			pub := amqp.Publishing{Headers: at, MessageId: "m"}
			_ = checkSendable(&pub, 131072)
		}
	})
	b.Run("one-walk", func(b *testing.B) {
		for b.Loop() {
			at, size, _ := flatTable(h)
			pub := amqp.Publishing{Headers: at, MessageId: "m"}
			_ = checkSendableSized(&pub, 131072, size)
		}
	})
}
