package acemq_test

import (
	"context"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
)

// A Duplicate answer acknowledges the delivery and is counted and marked as
// outcome "duplicate", not "acked".
func TestTelemetryDuplicate(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newTelRig(t, url)
		r.consume(func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Duplicate() })
		_, app := r.publish("again")
		s := r.wait(1)[0]
		if s.Outcome != acemq.OutcomeDuplicate || s.Decision != acemq.DecisionAccept {
			t.Fatalf("outcome %s, decision %s; want duplicate, accept", s.Outcome, s.Decision)
		}
		proc := r.spanFor(r.q+" process", r.spanFor(r.q+" publish", app).SpanContext())
		r.checkProcessSpan(proc, 1, "duplicate")
		if _, ok := spanEvent(proc, "message.duplicate"); !ok {
			t.Errorf("no message.duplicate event on the process span")
		}
		r.wantCount("acemq.consume.total", map[string]string{"queue": r.q, "outcome": "duplicate"}, 1)
		if s := r.tel.series(t, "acemq.messages.dead.lettered.total"); len(s) != 0 {
			t.Errorf("a duplicate was counted as a set-aside: %v", s)
		}
	})
	if !acemq.Duplicate().IsDuplicate() || acemq.Accept().IsDuplicate() {
		t.Error("IsDuplicate does not tell Duplicate from Accept")
	}
}
