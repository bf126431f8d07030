package perf

import (
	"strings"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// BenchmarkHeaderCost publishes the same 256-byte body with plain amqp091
// (window of 1,000, confirmed, into a quorum queue) under six header
// tables, to show what the broker and the client pay for headers: none;
// one int32 header; one one-byte string header; the ten headers of a full
// acemq envelope (317 bytes); one header of the same size; and ten headers
// with one-letter names and short values (88 bytes). Compare the
// broker-cpu-µs/msg and cpu-µs/msg metrics: the cost grows with both the
// number of entries and the bytes (docs/performance.md).
func BenchmarkHeaderCost(b *testing.B) {
	url := brokerURL(b)
	big := strings.Repeat("h", envelopeHeaderBytes-2-1-4-4) // one 'S' entry of the same size
	variants := []struct {
		name    string
		headers func(id string) amqp.Table
	}{
		{"none", func(string) amqp.Table { return nil }},
		{"envelope", rawHeaders},
		{"onebig", func(string) amqp.Table { return amqp.Table{"h": big} }},
		{"tiny", func(string) amqp.Table { return amqp.Table{"a": int32(1)} }},
		{"tinystr", func(string) amqp.Table { return amqp.Table{"a": "b"} }},
		{"short", func(id string) amqp.Table {
			return amqp.Table{"a": id, "b": "o", "c": int32(2), "d": "c", "e": "c", "f": int32(1),
				"g": time.Now().UnixMilli(), "h": "p", "i": "a", "j": int32(5)}
		}},
	}
	for _, v := range variants {
		b.Run(v.name, func(b *testing.B) {
			q := declare(b, url, quorum)
			pub := rawPublisher(b, url)
			ctx := ctxFor(b, 10*time.Minute)
			b.ReportMetric(float64(tableBytes(v.headers("12345"))), "header-bytes")
			m := startMeter()
			err := pub.Window(ctx, "", q, b.N, window, false, func(i int) amqp.Publishing {
				p := rawPublishing(uint64(i), false)
				p.Headers = v.headers(p.MessageId)
				return p
			}, nil)
			if err != nil {
				b.Fatal(err)
			}
			m.Stop(b, b.N)
		})
	}
}

// envelopeHeaderBytes is the encoded size of rawHeaders' table.
var envelopeHeaderBytes = tableBytes(rawHeaders("12345"))

// tableBytes is the AMQP field-table encoding size of t: per entry a
// short-string name and a tagged value.
func tableBytes(t amqp.Table) int {
	n := 4 // the table's length
	for k, v := range t {
		n += 1 + len(k) + 1
		switch x := v.(type) {
		case string:
			n += 4 + len(x)
		case int32:
			n += 4
		case int64:
			n += 8
		}
	}
	return n
}
