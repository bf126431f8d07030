package acemq

import (
	"testing"
	"time"
)

// laterOption stands for a SendOption added to the package later, which
// sendOptions has no case for.
type laterOption struct{}

func (laterOption) applySend(c *sendConfig) { c.priority, c.prioritySet = 9, true }

// Send applies every SendOption: one without a case in sendOptions' type
// switch is applied through the interface rather than ignored.
func TestSendOptionsApplyEveryOption(t *testing.T) {
	var sc sendConfig
	sendOptions([]SendOption{laterOption{}}, &sc)
	if !sc.prioritySet || sc.priority != 9 {
		t.Fatalf("an option without a case was ignored: %+v", sc)
	}
	env := MustEnvelope(Fields{Type: "t"})
	sc = sendConfig{}
	sendOptions([]SendOption{WithEnvelope(env), WithExpiration(time.Second), WithPriority(3), laterOption{}}, &sc)
	switch {
	case sc.env.ID() != env.ID():
		t.Errorf("WithEnvelope was not applied")
	case !sc.ttlSet || sc.ttl != time.Second:
		t.Errorf("WithExpiration was not applied")
	case sc.priority != 9:
		t.Errorf("the later option did not win over WithPriority(3): %d", sc.priority)
	case sc.validate() != nil:
		t.Errorf("validate() = %v", sc.validate())
	}
}

// The package's own Send options are applied without an allocation.
func TestSendOptionsDoNotAllocate(t *testing.T) {
	env := MustEnvelope(Fields{Type: "t"})
	opts := []SendOption{WithEnvelope(env), WithExpiration(time.Second), WithPriority(3)}
	if n := testing.AllocsPerRun(100, func() {
		var sc sendConfig
		sendOptions(opts, &sc)
	}); n != 0 {
		t.Errorf("sendOptions allocated %v times, want 0", n)
	}
}
