package topology

import (
	"testing"
	"time"
)

// x-max-age by the family's rule (docs/wire.md §5.9): the largest exact
// unit.
func TestMaxAge(t *testing.T) {
	for d, want := range map[time.Duration]string{
		7 * 24 * time.Hour: "7D", 36 * time.Hour: "36h", 90 * time.Minute: "90m", 45 * time.Second: "45s",
		24 * time.Hour: "1D", 25 * time.Hour: "25h", 61 * time.Second: "61s", time.Hour: "1h", 120 * time.Second: "2m",
	} {
		if got, err := formatMaxAge(d); err != nil || got != want {
			t.Errorf("MaxAge(%s) = %q, %v; want %q", d, got, err, want)
		}
	}
	for _, d := range []time.Duration{0, -time.Second, 1500 * time.Millisecond, time.Millisecond} {
		if got, err := formatMaxAge(d); err == nil {
			t.Errorf("MaxAge(%s) = %q, want an error", d, got)
		}
	}
}
