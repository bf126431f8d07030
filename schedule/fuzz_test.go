package schedule

import (
	"testing"
	"time"

	"github.com/acemq/acemq"
)

// FuzzReadJob: the control consumer reads x-schedule-* headers written by
// anyone. Reading never panics, and what it reads survives the hop: the
// headers written between rungs read back as the same job, and the
// delivered envelope keeps the id and drops the scheduler's headers.
func FuzzReadJob(f *testing.F) {
	f.Add("orders", "order.remind", int64(1767225600000), "", []byte("application/json"), "order.remind", uint8(0))
	f.Add("", "q", int64(-1), "1767225600000", []byte{0xff}, "", uint8(7))
	f.Add("x", "", int64(0), " 12 ", []byte(nil), "t", uint8(3))
	f.Fuzz(func(t *testing.T, exchange, key string, due int64, dueText string, ct []byte, typ string, shape uint8) {
		h := map[string]any{}
		if shape&1 == 0 {
			h[HeaderExchange] = exchange
		} else {
			h[HeaderExchange] = []byte(exchange)
		}
		if shape&2 == 0 {
			h[HeaderRoutingKey] = key
		}
		switch shape % 3 {
		case 0:
			h[HeaderDueAt] = due
		case 1:
			h[HeaderDueAt] = dueText
		case 2:
			h[HeaderDueAt] = int32(due)
		}
		if ct != nil {
			h[HeaderContentType] = ct
		}
		if typ != "" {
			h[HeaderType] = typ
		}
		h["x-death"] = []any{map[string]any{"count": int64(1)}}
		j, err := readJob(h)
		if err != nil {
			return
		}
		if j.contentType == "" {
			t.Fatal("a job without a content type")
		}
		env := acemq.MustEnvelope(acemq.Fields{})
		again, err := readJob(hopHeaders(env, j))
		if err != nil {
			t.Fatalf("the hop's own headers do not read back: %v", err)
		}
		if again != j {
			t.Fatalf("job %+v came back as %+v", j, again)
		}
		d, err := deliveredEnvelope(acemq.ReadEnvelope(hopHeaders(env, j), "k", env.ID()), j, time.Now())
		if err != nil {
			return // headers a new envelope refuses: dropped as malformed
		}
		if d.ID() != env.ID() || d.Type() != j.typ {
			t.Fatalf("delivered id %s type %q, want %s %q", d.ID(), d.Type(), env.ID(), j.typ)
		}
		for _, k := range []string{HeaderExchange, HeaderDueAt, "x-death"} {
			if _, ok := d.Header(k); ok {
				t.Fatalf("delivered with %s", k)
			}
		}
	})
}
