package acemq

import (
	"testing"
	"time"

	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/retry"
)

// TestChosenDelay: where a handler-chosen delay waits (docs/wire.md §5.1,
// §7.5): below the threshold in the consumer, as given; at or above it on
// the nearest declared rung at or above it, or the longest; in the
// consumer, as given, when the policy declares no rung.
func TestChosenDelay(t *testing.T) {
	rungs := retry.Exponential(6, 10*time.Second, time.Minute) // rungs 40s, 1m
	none := retry.Fixed(3, time.Second)                        // threshold 30s, no rungs
	for _, c := range []struct {
		p        retry.Policy
		d, want  time.Duration
		inBroker bool
	}{
		{rungs, 5 * time.Second, 5 * time.Second, false},
		{rungs, 0, 0, false},
		{rungs, 30 * time.Second, 40 * time.Second, true},
		{rungs, 40 * time.Second, 40 * time.Second, true},
		{rungs, 41 * time.Second, time.Minute, true},
		{rungs, time.Hour, time.Minute, true},
		{none, time.Hour, time.Hour, false},
		{rungs.WaitInBrokerFrom(0), time.Hour, time.Hour, false},
	} {
		got, in := engine.PolicyOf(c.p).ChosenDelay(c.d)
		if got != c.want || in != c.inBroker {
			t.Errorf("%s: RetryAfter(%s) waits %s (broker %v), want %s (broker %v)", c.p, c.d, got, in, c.want, c.inBroker)
		}
	}
}
