package acemq_test

import (
	"encoding/binary"
	"math"
	"strconv"
	"testing"

	"github.com/acemq/acemq"
)

// fuzzHeaderNames are the names a fuzzed header map draws from: every
// known reserved header, unknown and case-varied reserved ones, the shared
// unprefixed ones and plain application names.
var fuzzHeaderNames = []string{
	acemq.HeaderID, acemq.HeaderType, acemq.HeaderVersion, acemq.HeaderCorrelation, acemq.HeaderCausation,
	acemq.HeaderAttempt, acemq.HeaderFirstSeen, acemq.HeaderOrigin, acemq.HeaderError, acemq.HeaderClaim,
	acemq.HeaderRoute, acemq.HeaderRoutePosition, acemq.HeaderRouteID,
	"x-acemq-future", "X-ACEMQ-ID", "x-acemq-replayed-at", "x-acemq-",
	acemq.HeaderReplayedAt, acemq.HeaderReplyTo, "x-tenant", "x-death", "traceparent", "",
}

// fuzzReader hands out the fuzz input a few bytes at a time; an exhausted
// reader gives zeros.
type fuzzReader struct{ b []byte }

func (r *fuzzReader) more() bool { return len(r.b) > 0 }

func (r *fuzzReader) byte() byte {
	if len(r.b) == 0 {
		return 0
	}
	c := r.b[0]
	r.b = r.b[1:]
	return c
}

func (r *fuzzReader) bytes() []byte {
	n := min(int(r.byte()%32), len(r.b))
	out := r.b[:n:n]
	r.b = r.b[n:]
	return out
}

func (r *fuzzReader) u64() uint64 {
	var buf [8]byte
	n := copy(buf[:], r.b)
	r.b = r.b[n:]
	return binary.LittleEndian.Uint64(buf[:])
}

// value draws one header value of one of the types an AMQP client or a
// JSON store hands over, nested tables and arrays included.
func (r *fuzzReader) value(depth int) any {
	kind := r.byte() % 20
	switch kind {
	case 0:
		return string(r.bytes())
	case 1:
		return r.bytes()
	case 2:
		return int8(r.u64())
	case 3:
		return int16(r.u64())
	case 4:
		return int32(r.u64())
	case 5:
		return int64(r.u64())
	case 6:
		return uint8(r.u64())
	case 7:
		return uint16(r.u64())
	case 8:
		return uint32(r.u64())
	case 9:
		return r.u64()
	case 10:
		return math.Float32frombits(uint32(r.u64()))
	case 11:
		return math.Float64frombits(r.u64())
	case 12:
		return r.byte()%2 == 0
	case 13:
		return nil
	case 14:
		return int(int64(r.u64()))
	case 15:
		return strconv.FormatInt(int64(r.u64())%1e13, 10) // a decimal string
	case 16:
		return float64(int64(r.u64()) % 1e13) // a whole float
	case 17:
		return int32(r.byte() % 8) // a small counter
	case 18:
		if depth > 2 {
			return nil
		}
		m := map[string]any{}
		for n := r.byte() % 3; n > 0; n-- {
			m[string(r.bytes())] = r.value(depth + 1)
		}
		return m
	default:
		if depth > 2 {
			return nil
		}
		var a []any
		for n := r.byte() % 3; n > 0; n-- {
			a = append(a, r.value(depth+1))
		}
		return a
	}
}

func fuzzHeaders(data []byte) map[string]any {
	r := &fuzzReader{data}
	h := map[string]any{}
	for i := 0; r.more() && i < 32; i++ {
		sel := r.byte()
		var name string
		if int(sel) < len(fuzzHeaderNames)*10 {
			name = fuzzHeaderNames[int(sel)%len(fuzzHeaderNames)]
		} else {
			name = string(r.bytes())
		}
		h[name] = r.value(0)
	}
	return h
}

// FuzzReadEnvelope reads arbitrary header maps: ReadEnvelope never panics,
// always gives an envelope within the contract's ranges, never hands a
// reserved header to the application, and what AppendHeaders writes reads
// back to the same fields (and writes the same headers again).
func FuzzReadEnvelope(f *testing.F) {
	f.Add([]byte{}, "orders.new", "mid")
	f.Add([]byte{0, 0, 5, 'a', 'b', 'c', 'd', 'e'}, "", "")
	// id as bytes, attempt as a decimal string, first-seen as a whole float.
	f.Add([]byte{0, 1, 4, 'i', 'd', '-', '1', 5, 15, 1, 2, 3, 4, 5, 6, 7, 8, 6, 16, 0x4e, 0x21, 0xa6, 0x9d, 0x9b, 0x01, 0, 0}, "rk", "")
	// a route with whitespace and a negative position; an unknown reserved table.
	f.Add([]byte{10, 0, 9, ' ', 'a', ' ', ',', ',', 'b', ' ', ',', ' ', 11, 2, 0xff, 13, 18, 2, 1, 'k', 0, 1, 'v', 2, 'j', 5, 1, 0, 0, 0, 0, 0, 0, 0}, "x", "y")
	// fractional float version, huge uint64 attempt, invalid UTF-8 type.
	f.Add([]byte{2, 11, 0, 0, 0, 0, 0, 0, 4, 0x40, 5, 9, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 1, 1, 2, 0xff, 0xfe}, "orders", "m")
	f.Add([]byte{250, 3, 'x', '-', 'a', 19, 2, 0, 1, 'q', 13}, "\xff", "\x00")
	f.Fuzz(func(t *testing.T, data []byte, routingKey, messageID string) {
		in := fuzzHeaders(data)
		inCopy := cloneForCompare(in)
		e := acemq.ReadEnvelope(in, routingKey, messageID)
		if !sameValue(in, inCopy) {
			t.Fatalf("ReadEnvelope changed its input")
		}
		if e.ID() == "" || e.Type() == "" || e.CorrelationID() == "" {
			t.Errorf("empty id, type or correlation: %#v", e.Fields())
		}
		if e.Version() < 1 || e.Attempt() < 1 || e.Version() > math.MaxInt32 || e.Attempt() > math.MaxInt32 {
			t.Errorf("version %d attempt %d out of range", e.Version(), e.Attempt())
		}
		if e.Fields().RoutePosition < 0 || (len(e.Fields().Route) == 0 && (e.Fields().RoutePosition != 0 || e.Fields().RouteID != "")) {
			t.Errorf("route %q position %d id %q", e.Fields().Route, e.Fields().RoutePosition, e.Fields().RouteID)
		}
		if _, known := e.Age(); known != e.FirstSeenKnown() {
			t.Error("Age and FirstSeenKnown disagree")
		}
		for k := range e.Headers() {
			if acemq.IsReserved(k) {
				t.Errorf("reserved header %q handed to the application", k)
			}
		}
		for k := range e.UnknownReserved() {
			if !acemq.IsReserved(k) {
				t.Errorf("%q kept as an unknown reserved header", k)
			}
		}

		h1 := e.AppendHeaders(nil, routingKey)
		e2 := acemq.ReadEnvelope(h1, routingKey, messageID)
		if d := envelopeDiff(e, e2); d != "" {
			t.Fatalf("written and read back, the envelope changed: %s", d)
		}
		if !e2.FirstSeenKnown() {
			t.Error("a written first-seen read back as unknown")
		}
		h2 := e2.AppendHeaders(nil, routingKey)
		if !sameValue(h1, h2) {
			t.Fatalf("writing the read-back envelope differs:\n%#v\n%#v", h1, h2)
		}
		unknown := e.UnknownReserved()
		for k, v := range in {
			if _, ok := unknown[k]; acemq.IsReserved(k) && !ok {
				continue // a known field, re-rendered canonically
			}
			if !sameValue(h1[k], v) {
				t.Errorf("header %q passed through as %#v, came as %#v", k, h1[k], v)
			}
		}
	})
}
