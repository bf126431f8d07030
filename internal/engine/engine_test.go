package engine

import (
	"strings"
	"testing"
	"unicode/utf8"
)

// conn stands for *acemq.Conn: it embeds a Handle through an unexported
// alias, as acemq.Conn does.
type handle = Handle

type conn struct{ handle }

func TestOf(t *testing.T) {
	e := &Conn{}
	c := &conn{NewHandle(e)}
	if got := Of(c); got != e {
		t.Errorf("Of(a conn) = %p, want %p", got, e)
	}
	var nilConn *conn
	for _, v := range []any{nil, nilConn, "a string", e} {
		if got := Of(v); got != nil {
			t.Errorf("Of(%#v) = %p, want nil", v, got)
		}
	}
}

type consumer struct{ ConsumerHandle }

func TestConsumerOf(t *testing.T) {
	s := NewConsumer("q", []string{"q.retry.1s"})
	c := &consumer{NewConsumerHandle(s)}
	if got := ConsumerOf(c); got != s {
		t.Fatalf("ConsumerOf(a consumer) = %p, want %p", got, s)
	}
	s.AddUnsettled(2)
	s.AddUnsettled(-1)
	if n := ConsumerOf(c).Unsettled(); n != 1 {
		t.Errorf("Unsettled = %d, want 1", n)
	}
	var nilConsumer *consumer
	if ConsumerOf(nilConsumer) != nil || ConsumerOf(3) != nil {
		t.Error("ConsumerOf found state in a nil consumer or a number")
	}
}

type codecOpt struct {
	Carrier
	name string
}

type otherOpt struct{}

func TestCarried(t *testing.T) {
	opts := []any{otherOpt{}, codecOpt{Carry("json"), "json"}, otherOpt{}, codecOpt{Carry("xml"), "xml"}, codecOpt{Carry(7), "seven"}}
	if got := Carried(opts, "default"); got != "xml" {
		t.Errorf("Carried = %q, want the last string carried, xml", got)
	}
	if got := Carried([]any{otherOpt{}}, "default"); got != "default" {
		t.Errorf("Carried with no carrier = %q, want default", got)
	}
}

func TestCutReason(t *testing.T) {
	if got := CutReason("short", 64); got != "short" {
		t.Errorf("a short reason was changed: %q", got)
	}
	long := strings.Repeat("é", 100) // 200 bytes
	got := CutReason(long, 101)
	if len(got) > 101 || !utf8.ValidString(got) || !strings.HasSuffix(got, "(cut; the reason was 200 bytes)") {
		t.Errorf("CutReason(200 bytes, 101) = %q (%d bytes)", got, len(got))
	}
}

// TestNoBreakerCostsNothing: a consumer without a circuit breaker admits
// every delivery and holds none back, without allocating (the check
// package acemq's TestEmptyPipelineDoesNotAllocate made before the breaker
// moved here).
func TestNoBreakerCostsNothing(t *testing.T) {
	var b *breaker
	v := failure{decision: Retry}
	allocs := testing.AllocsPerRun(200, func() {
		if !b.admit() || b.holdBack(v) {
			t.Fatal("a consumer without a breaker held a delivery back")
		}
	})
	if allocs != 0 {
		t.Errorf("no breaker costs %.0f allocations a delivery", allocs)
	}
	if s := b.State(); s != BreakerClosed {
		t.Errorf("no breaker is %q, want closed", s)
	}
}
