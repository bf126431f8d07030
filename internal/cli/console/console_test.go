package console

import (
	"testing"

	"github.com/acemq/acemq/console"
)

func TestParseSize(t *testing.T) {
	for in, want := range map[string]int{"": console.DefaultPeekBudget, "65536": 65536, "64KiB": 64 << 10, "8MiB": 8 << 20, "1GiB": 1 << 30, "100B": 100} {
		if got, err := parseSize(in); err != nil || got != want {
			t.Errorf("parseSize(%q) = %d, %v; want %d", in, got, err, want)
		}
	}
	for _, in := range []string{"lots", "-1", "8MB", "1.5MiB", "99999999999999999999GiB"} {
		if _, err := parseSize(in); err == nil {
			t.Errorf("parseSize(%q) accepted", in)
		}
	}
}
