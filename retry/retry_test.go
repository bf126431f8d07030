package retry

import (
	"slices"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/engine"
)

// TestExponentialPlan: the plan acemq runs for an exponential policy holds
// waits of 30 s or more on rungs, stops at the attempt limit and the age
// limit, and follows the broker threshold.
func TestExponentialPlan(t *testing.T) {
	p := Exponential(6, 10*time.Second, 5*time.Minute).GiveUpAfter(time.Hour)
	pl := engine.PolicyOf(p)
	if got, want := pl.BrokerRungs(), []time.Duration{40 * time.Second, 80 * time.Second, 160 * time.Second}; !slices.Equal(got, want) {
		t.Errorf("%s: rungs %v, want %v", p, got, want)
	}
	if !pl.ShouldRetry(5, 59*time.Minute, true) || pl.ShouldRetry(6, 0, true) || pl.ShouldRetry(2, time.Hour, true) {
		t.Errorf("%s: ShouldRetry(5, 59m), (6, 0), (2, 1h) = %v %v %v, want true false false", p,
			pl.ShouldRetry(5, 59*time.Minute, true), pl.ShouldRetry(6, 0, true), pl.ShouldRetry(2, time.Hour, true))
	}
	if got := engine.PolicyOf(Fixed(3, time.Second).WaitInBrokerFrom(time.Second)).BrokerRungs(); !slices.Equal(got, []time.Duration{time.Second}) {
		t.Errorf("fixed(3, 1s).waitInBrokerFrom(1s): rungs %v, want [1s]", got)
	}
	if got := engine.PolicyOf(p.WaitInBrokerFrom(0)).BrokerRungs(); len(got) != 0 {
		t.Errorf("%s.waitInBrokerFrom(0): rungs %v, want none", p, got)
	}
}

// TestZeroIsNone: the zero Policy runs as None, and a policy built to
// None's values equals it.
func TestZeroIsNone(t *testing.T) {
	if got, want := engine.PolicyOf(Policy{}), engine.NoRetry(); got != want {
		t.Errorf("the zero Policy's plan = %+v, want %+v", got, want)
	}
	for _, p := range []Policy{None(), Fixed(1, 0), None().GiveUpAfter(0), Policy{}.WaitInBrokerFrom(30 * time.Second)} {
		if p != (Policy{}) || p.String() != "none()" {
			t.Errorf("%s (%#v) is not the zero Policy", p, p)
		}
	}
	if p := None().GiveUpAfter(time.Minute); p == (Policy{}) || p.String() != "none().giveUpAfter(1m)" {
		t.Errorf("None().GiveUpAfter(1m) = %s", p)
	}
}
