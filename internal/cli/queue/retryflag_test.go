package queue

import (
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/retry"
)

func TestParseRetryPolicy(t *testing.T) {
	for in, want := range map[string]retry.Policy{
		"none()":                       retry.None(),
		"fixed(3, 30s)":                retry.Fixed(3, 30*time.Second),
		" exponential(5,1s,1m) ":       retry.Exponential(5, time.Second, time.Minute),
		"fixed(3, 1m).giveUpAfter(1h)": retry.Fixed(3, time.Minute).GiveUpAfter(time.Hour),
		"exponential(4, 500ms, 10s).withJitter(0).waitInBrokerFrom(5s)": retry.Exponential(4, 500*time.Millisecond, 10*time.Second).Jitter(0).WaitInBrokerFrom(5 * time.Second),
	} {
		got, err := parseRetryPolicy(in)
		if err != nil {
			t.Errorf("%q: %v", in, err)
			continue
		}
		if got.String() != want.String() {
			t.Errorf("%q = %s, want %s", in, got, want)
		}
		// What String writes reads back as the same policy.
		if again, err := parseRetryPolicy(got.String()); err != nil || again.String() != got.String() {
			t.Errorf("%s does not read back: %v, %v", got, again, err)
		}
	}
	for _, in := range []string{"", "fixed(3)", "fixed(0, 1s)", "exponential(3, 1m, 1s)", "linear(3, 1s)", "fixed(3, 1s).giveUpAfter(-1s)", "fixed(3, 1s)x", "fixed(3, 1s).later(1s)", "fixed(3, soon)", "none(1)", "fixed(3, 1s).withJitter(2)"} {
		if _, err := parseRetryPolicy(in); err == nil || !strings.Contains(err.Error(), "--retry") {
			t.Errorf("%q: %v, want an error naming --retry", in, err)
		}
	}
}
