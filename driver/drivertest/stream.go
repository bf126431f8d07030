package drivertest

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq/driver"
)

// The stream and single-active-consumer tests: what a stream reader and a
// consumer group rely on, held alike on every broker that reports
// Capabilities.Streams (docs/wire.md §5.9, §5.10).

// streamQueue declares a stream called e.name(s) with extra arguments.
func (e *env) streamQueue(s string, args driver.Table) string {
	e.t.Helper()
	a := driver.Table{"x-queue-type": "stream"}
	for k, v := range args {
		a[k] = v
	}
	return e.queue(e.admin, driver.Queue{Name: e.name(s), Durable: true, Args: a}).Name
}

// readOffsets subscribes to stream q at offset and returns the offsets and
// bodies of the first n deliveries, acking each.
func (e *env) readOffsets(q string, offset any, n int) ([]int64, []string) {
	e.t.Helper()
	sub := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 3, Args: driver.Table{"x-stream-offset": offset}})
	var offs []int64
	var bodies []string
	for range n {
		d := e.recv(sub)
		off, ok := d.StreamOffset()
		if !ok {
			e.t.Fatalf("a delivery from the stream %q has no x-stream-offset header: %v", q, d.Headers)
		}
		offs = append(offs, off)
		bodies = append(bodies, string(d.Body))
		if err := d.Ack(); err != nil {
			e.t.Fatalf("ack on a stream: %v", err)
		}
	}
	return offs, bodies
}

// readStreamTo reads the stream q from its first message up to the one
// whose body begins with last (at most max messages), acking each, and
// returns the offsets and bodies read.
func (e *env) readStreamTo(q, last string, max int) ([]int64, []string) {
	e.t.Helper()
	sub := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 3, Args: driver.Table{"x-stream-offset": "first"}})
	var offs []int64
	var bodies []string
	for len(bodies) < max {
		d := e.recv(sub)
		off, ok := d.StreamOffset()
		if !ok {
			e.t.Fatalf("a delivery from the stream %q has no x-stream-offset header: %v", q, d.Headers)
		}
		offs = append(offs, off)
		bodies = append(bodies, string(d.Body))
		if err := d.Ack(); err != nil {
			e.t.Fatalf("ack on a stream: %v", err)
		}
		if strings.HasPrefix(string(d.Body), last) {
			break
		}
	}
	return offs, bodies
}

func seq(from, to int64) []int64 {
	var out []int64
	for i := from; i <= to; i++ {
		out = append(out, i)
	}
	return out
}

// testStreamOffsets checks a stream's offsets and every start: first,
// last, next, an integer offset, a timestamp; that reading removes nothing;
// and that a stream consumer needs a prefetch.
func testStreamOffsets(e *env) {
	t := e.t
	if !e.caps.Streams {
		t.Log("not run: the broker does not report streams")
		return
	}
	q := e.streamQueue("stream", nil)
	before := time.Now().Add(-2 * time.Second)
	for i := range 5 {
		e.publish(e.admin, driver.Message{RoutingKey: q, MessageID: e.id(), Body: []byte("m" + strconv.Itoa(i))})
	}
	offs, bodies := e.readOffsets(q, "first", 5)
	if !slices.Equal(offs, seq(0, 4)) || strings.Join(bodies, ",") != "m0,m1,m2,m3,m4" {
		t.Fatalf("from first: offsets %v bodies %v; want 0..4, m0..m4", offs, bodies)
	}
	// Reading removed nothing: a second reader sees all five again.
	if offs, _ := e.readOffsets(q, "first", 5); !slices.Equal(offs, seq(0, 4)) {
		t.Errorf("a second reader from first got %v; reading must not remove messages", offs)
	}
	if offs, _ := e.readOffsets(q, int64(2), 3); !slices.Equal(offs, seq(2, 4)) {
		t.Errorf("from offset 2: %v, want [2 3 4]", offs)
	}
	if offs, _ := e.readOffsets(q, before, 5); !slices.Equal(offs, seq(0, 4)) {
		t.Errorf("from a timestamp before the first publish: %v, want 0..4", offs)
	}
	if offs, _ := e.readOffsets(q, "last", 1); offs[0] != 4 {
		t.Errorf("from last: %v, want to start at 4", offs)
	}

	// next: only what is published after the subscription starts.
	sub := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 3, Args: driver.Table{"x-stream-offset": "next"}})
	e.noRecv(sub, "a reader from next sees nothing already in the stream")
	e.publish(e.admin, driver.Message{RoutingKey: q, MessageID: e.id(), Body: []byte("m5")})
	d := e.recv(sub)
	if off, _ := d.StreamOffset(); off != 5 || string(d.Body) != "m5" {
		t.Errorf("from next: offset %d body %q, want 5 m5", off, d.Body)
	}
	_ = d.Ack()

	// A timestamp in the future: nothing yet, then what comes.
	sub = e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 3, Args: driver.Table{"x-stream-offset": time.Now().Add(time.Hour)}})
	e.noRecv(sub, "a reader from a future timestamp sees nothing already in the stream")

	// x-stream-offset belongs to streams: on another queue it is refused.
	plain := e.simpleQueue("not-a-stream")
	if s, err := e.conn().Consume(e.ctx, driver.ConsumeSpec{Queue: plain, Prefetch: 1, Args: driver.Table{"x-stream-offset": "first"}}); err == nil {
		_ = s.Close()
		t.Error("x-stream-offset on a classic queue was accepted; RabbitMQ refuses it")
	}

	// Without a prefetch the broker refuses the consumer.
	if s, err := e.conn().Consume(e.ctx, driver.ConsumeSpec{Queue: q, Args: driver.Table{"x-stream-offset": "first"}}); err == nil {
		_ = s.Close()
		t.Error("a stream consumer without a prefetch was accepted; RabbitMQ refuses it")
	}
}

// testStreamRetention checks retention by size: whole old segments go and
// what is left is read in order, with increasing offsets.
func testStreamRetention(e *env) {
	t := e.t
	if !e.caps.Streams {
		t.Log("not run: the broker does not report streams")
		return
	}
	q := e.streamQueue("retained", driver.Table{"x-max-length-bytes": int64(3000), "x-stream-max-segment-size-bytes": int64(1000)})
	body := []byte(strings.Repeat("x", 100))
	const n = 100
	for i := 0; i < n; i++ {
		e.publish(e.admin, driver.Message{RoutingKey: q, MessageID: e.id(), Body: append([]byte(fmt.Sprintf("%03d", i)), body...)})
	}
	var bodies []string
	e.eventually("retention to remove the oldest segments", func() bool {
		_, b := e.readOffsets(q, "first", 1)
		bodies = b
		return !strings.HasPrefix(b[0], "000")
	})
	if first, err := strconv.Atoi(bodies[0][:3]); err != nil || first >= n-3 {
		t.Fatalf("retention kept only from message %q of %d: the segment being written must stay", bodies[0][:3], n)
	}
	// RabbitMQ's offsets are not contiguous (a new segment takes an offset
	// of its own), so only their order is checked: they increase, and what
	// is left is every message from the first kept to the last, in order.
	// Retention may remove more meanwhile (seen on RabbitMQ 4.3: the first
	// message kept was 091, and 094 a moment later; 3.10 and 4.0 had
	// finished at the first look): what is left is read again, from the
	// first message kept now to the last.
	offs, rest := e.readStreamTo(q, fmt.Sprintf("%03d", n-1), n)
	first, err := strconv.Atoi(rest[0][:3])
	if err != nil || first >= n-3 {
		t.Fatalf("retention kept only from message %q of %d: the segment being written must stay", rest[0][:3], n)
	}
	if len(rest) != n-first {
		t.Fatalf("from message %d to the last, %d messages are left, want %d: nothing after the cut may be missing", first, len(rest), n-first)
	}
	for i := range rest {
		if want := fmt.Sprintf("%03d", first+i); !strings.HasPrefix(rest[i], want) {
			t.Fatalf("after retention message %d begins %q, want %s: nothing after the cut may be missing", i, rest[i][:3], want)
		}
		if i > 0 && offs[i] <= offs[i-1] {
			t.Fatalf("offsets %v do not increase", offs)
		}
	}
}

// testSingleActiveConsumer checks x-single-active-consumer: one consumer
// gets everything while the others stand by; when it goes, the next takes
// over with what it left unsettled, in order, then the rest.
func testSingleActiveConsumer(e *env) {
	t := e.t
	q := e.queue(e.admin, driver.Queue{Name: e.name("sac"), Durable: true, Args: driver.Table{"x-single-active-consumer": true}}).Name
	c1, c2 := e.conn(), e.conn()
	active := e.consume(c1, driver.ConsumeSpec{Queue: q, Tag: "acemq-" + q + "-1", Prefetch: 10})
	standby := e.consume(c2, driver.ConsumeSpec{Queue: q, Tag: "acemq-" + q + "-2", Prefetch: 10})
	for i := range 4 {
		e.publish(e.admin, driver.Message{RoutingKey: q, MessageID: e.id(), Body: []byte("m" + strconv.Itoa(i))})
	}
	for i := range 4 {
		d := e.recv(active)
		if string(d.Body) != "m"+strconv.Itoa(i) {
			t.Fatalf("the active consumer got %q, want m%d", d.Body, i)
		}
		if i < 2 {
			if err := d.Ack(); err != nil {
				t.Fatal(err)
			}
		}
	}
	e.noRecv(standby, "the standby consumer must get nothing while the active one lives")
	// The active member dies with m2 and m3 unsettled.
	if err := c1.Close(); err != nil {
		t.Fatal(err)
	}
	e.publish(e.admin, driver.Message{RoutingKey: q, MessageID: e.id(), Body: []byte("m4")})
	var got []string
	for range 3 {
		d := e.recv(standby)
		got = append(got, string(d.Body))
		_ = d.Ack()
	}
	if strings.Join(got, ",") != "m2,m3,m4" {
		t.Errorf("the standby took over with %v, want m2,m3,m4 in order", got)
	}
}
