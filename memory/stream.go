package memory

import (
	"fmt"
	"math"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
)

// Streams (x-queue-type=stream), as RabbitMQ 3.9+ serves them over AMQP
// 0-9-1:
//
//   - An append-only log. Every message gets the next offset, from 0, and
//     every delivery carries it in the x-stream-offset header (an int64).
//     Consumers do not remove messages: each reads the whole log from
//     where it attached, and acknowledging only frees its prefetch slot.
//   - A consumer needs a prefetch (basic.qos) and manual acknowledgements;
//     basic.nack, basic.reject and basic.get are refused (RabbitMQ closes
//     the connection with 540 NOT_IMPLEMENTED; the memory broker ends the
//     subscription and returns the error).
//   - The consumer argument x-stream-offset: "first", "last" (the last
//     message: every publish here is its own chunk, which RabbitMQ's
//     chunks may also be), "next" (the default), an integer offset (below
//     the first retained one means first, beyond the end means next) or a
//     timestamp (the first message written at or after it, to the second,
//     since an AMQP timestamp has whole seconds).
//   - Retention as RabbitMQ applies it: the log is cut into segments of
//     x-stream-max-segment-size-bytes (default 500 000 000); when a segment
//     fills and a new one begins, whole old segments are removed while the
//     log holds more than x-max-length-bytes, or while a segment's newest
//     message is older than x-max-age. The segment being written is never
//     removed. A segment's size counts message bodies; RabbitMQ counts its
//     encoded records, so its segments fill a little sooner.
//   - Streams are durable, never exclusive or auto-delete, and take no
//     dead-letter arguments, x-message-ttl, x-max-priority or single active
//     consumer.

// defaultSegmentBytes is RabbitMQ's default x-stream-max-segment-size-bytes.
const defaultSegmentBytes = 500_000_000

// streamLog is a stream queue's log. Guarded by broker.mu.
type streamLog struct {
	maxAge       time.Duration // 0: none
	maxBytes     int64         // 0: none
	segmentBytes int64

	base     int64 // offset of entries[0]
	entries  []streamEntry
	bytes    int64   // bodies held
	segments []int64 // first offset of every segment, oldest first
	segSize  int64   // bytes of the segment being written

	cursors map[*sub]int64 // next offset to deliver, per consumer
}

type streamEntry struct {
	m  *message
	at time.Time
}

// end is the offset the next message will get.
func (l *streamLog) end() int64 { return l.base + int64(len(l.entries)) }

// parseStreamArgs reads the arguments of a stream queue.
func parseStreamArgs(name string, q driver.Queue) (*streamLog, error) {
	pe := func(format string, args ...any) error {
		return &driver.PreconditionError{Kind: "queue", Name: name, Detail: fmt.Sprintf(format, args...)}
	}
	if err := durableOnly(name, q); err != nil {
		return nil, err
	}
	for _, a := range []string{"x-dead-letter-exchange", "x-dead-letter-routing-key", "x-message-ttl", "x-single-active-consumer", "x-max-length", "x-max-priority"} {
		if _, ok := q.Args[a]; ok {
			return nil, fmt.Errorf("memory: declare queue %q: a stream does not take the argument %q", name, a)
		}
	}
	l := &streamLog{segmentBytes: defaultSegmentBytes, cursors: map[*sub]int64{}, segments: []int64{0}}
	if v, ok := q.Args["x-max-age"]; ok {
		s, _ := v.(string)
		d, err := parseMaxAge(s)
		if err != nil {
			return nil, pe("invalid arg 'x-max-age' for queue '%s' in vhost '/': {invalid_max_age,%s}", name, formatValue(v))
		}
		l.maxAge = d
	}
	positive := func(arg string) (int64, error) {
		v := q.Args[arg]
		n, isInt := wire.Integer(v)
		switch {
		case !isInt:
			return 0, pe("invalid arg '%s' for queue '%s' in vhost '/': {unacceptable_type,%s}", arg, name, typeName(v))
		case n < 0:
			return 0, pe("invalid arg '%s' for queue '%s' in vhost '/': {value_negative,%d}", arg, name, n)
		}
		return n, nil
	}
	if _, ok := q.Args["x-max-length-bytes"]; ok {
		n, err := positive("x-max-length-bytes")
		if err != nil {
			return nil, err
		}
		l.maxBytes = n
	}
	if _, ok := q.Args["x-stream-max-segment-size-bytes"]; ok {
		n, err := positive("x-stream-max-segment-size-bytes")
		if err != nil {
			return nil, err
		}
		if n > 0 {
			l.segmentBytes = n
		}
	}
	return l, nil
}

// parseMaxAge reads an x-max-age value: a positive whole number followed by
// one of Y, M, D, h, m, s, as RabbitMQ accepts it.
func parseMaxAge(s string) (time.Duration, error) {
	if len(s) < 2 {
		return 0, fmt.Errorf("bad max age %q", s)
	}
	var n int64
	for _, r := range s[:len(s)-1] {
		if r < '0' || r > '9' {
			return 0, fmt.Errorf("bad max age %q", s)
		}
		// RabbitMQ takes any positive number; past what an int64 holds it
		// stays there (the age is the longest there is either way).
		if n <= (math.MaxInt64-9)/10 {
			n = n*10 + int64(r-'0')
		}
	}
	unit := map[byte]time.Duration{'Y': 365 * 24 * time.Hour, 'M': 30 * 24 * time.Hour, 'D': 24 * time.Hour, 'h': time.Hour, 'm': time.Minute, 's': time.Second}[s[len(s)-1]]
	if unit == 0 || n == 0 {
		return 0, fmt.Errorf("bad max age %q", s)
	}
	if n > math.MaxInt64/int64(unit) {
		// RabbitMQ takes an age longer than a time.Duration holds (about
		// 292 years); so does this broker, as the longest it can keep.
		// (FuzzParseMaxAge found the product overflowing to a negative age.)
		return time.Duration(math.MaxInt64), nil
	}
	return time.Duration(n) * unit, nil
}

// appendStream appends m to q's log, applies retention when a segment
// rolls over, and delivers to the consumers with room.
func (b *broker) appendStream(q *queue, m *message) {
	l := q.stream
	b.seq++
	m.seq = b.seq
	off := l.end()
	h := cloneTable(m.headers)
	if h == nil {
		h = driver.Table{}
	}
	h[driver.StreamOffsetHeader] = off
	m.headers = h
	m.expiresAt = time.Time{}
	l.append(m, b.now())
	b.dispatchStream(q)
}

// append adds m, written at t, starting a new segment (and applying
// retention) when it does not fit in the one being written.
func (l *streamLog) append(m *message, t time.Time) {
	size := int64(len(m.body))
	if l.segSize > 0 && l.segSize+size > l.segmentBytes {
		l.segments = append(l.segments, l.end())
		l.segSize = 0
		l.retain(t)
	}
	l.entries = append(l.entries, streamEntry{m: m, at: t})
	l.bytes += size
	l.segSize += size
}

// retain removes whole segments from the head, never the one being written.
func (l *streamLog) retain(t time.Time) {
	for len(l.segments) > 1 {
		first, next := l.segments[0], l.segments[1]
		n := int(next - first)
		var segBytes int64
		for _, e := range l.entries[:n] {
			segBytes += int64(len(e.m.body))
		}
		tooBig := l.maxBytes > 0 && l.bytes > l.maxBytes
		tooOld := l.maxAge > 0 && t.Sub(l.entries[n-1].at) > l.maxAge
		if !tooBig && !tooOld {
			return
		}
		clear(l.entries[:n])
		l.entries = l.entries[n:]
		l.base = next
		l.bytes -= segBytes
		l.segments = l.segments[1:]
	}
}

// startOffset resolves a consumer's x-stream-offset argument.
func (l *streamLog) startOffset(queue string, args driver.Table) (int64, error) {
	v, ok := args[driver.StreamOffsetHeader]
	if !ok {
		return l.end(), nil
	}
	clamp := func(n int64) int64 { return min(max(n, l.base), l.end()) }
	switch v := v.(type) {
	case string:
		switch v {
		case "first":
			return l.base, nil
		case "last":
			return clamp(l.end() - 1), nil
		case "next":
			return l.end(), nil
		}
	case time.Time:
		at := v.Truncate(time.Second)
		for i, e := range l.entries {
			if !e.at.Before(at) {
				return l.base + int64(i), nil
			}
		}
		return l.end(), nil
	default:
		if n, isInt := wire.Integer(v); isInt {
			return clamp(n), nil
		}
	}
	return 0, fmt.Errorf("memory: consume from queue %q: 541 INTERNAL_ERROR - the x-stream-offset %s is not first, last, next, an integer offset or a timestamp", queue, formatValue(v))
}

// dispatchStream hands every consumer of q's log what it has room for, in
// offset order, from its own position.
func (b *broker) dispatchStream(q *queue) {
	l := q.stream
	if q.deleted {
		return
	}
	for s := range l.cursors {
		if s.cancelled {
			delete(l.cursors, s)
		}
	}
	for _, s := range q.consumers {
		next, ok := l.cursors[s]
		if !ok {
			continue
		}
		next = max(next, l.base)
		for s.hasRoom() && next < l.end() {
			s.assign(q, l.entries[next-l.base].m)
			next++
		}
		l.cursors[s] = next
	}
}

// streamRefused ends a subscription that tried to nack or reject a delivery
// of a stream, as RabbitMQ closes the connection for it.
func (b *broker) streamRefused(s *sub, how settleKind) error {
	err := fmt.Errorf("memory: %s on consumer %q: 540 NOT_IMPLEMENTED - basic.nack and basic.reject not supported by stream queues queue '%s' in vhost '/'", how, s.tag, s.q.name)
	b.closeSub(s)
	delete(s.c.subs, s)
	return err
}

// streamInfo is what InspectQueue reports about a stream: the messages its
// log holds.
func (l *streamLog) count() int { return len(l.entries) }

// streamConsumable checks a consumer of stream q as RabbitMQ does and
// returns the offset it starts at.
func streamConsumable(q *queue, spec driver.ConsumeSpec) (int64, error) {
	if spec.Prefetch <= 0 {
		return 0, &driver.PreconditionError{Kind: "queue", Name: q.name, Detail: fmt.Sprintf(
			"consumer prefetch count is not set for 'queue '%s' in vhost '/''", q.name)}
	}
	return q.stream.startOffset(q.name, spec.Args)
}

// notStreamConsumable refuses the stream consumer argument on a queue that
// is not a stream, as RabbitMQ does.
func notStreamConsumable(q *queue, spec driver.ConsumeSpec) error {
	if _, ok := spec.Args[driver.StreamOffsetHeader]; !ok {
		return nil
	}
	typ := "rabbit_classic_queue"
	if t, _ := q.args["x-queue-type"].(string); t == "quorum" {
		typ = "rabbit_quorum_queue"
	}
	return &driver.PreconditionError{Kind: "queue", Name: q.name, Detail: fmt.Sprintf(
		"invalid arg 'x-stream-offset' for queue '%s' in vhost '/' of queue type %s", q.name, typ)}
}
