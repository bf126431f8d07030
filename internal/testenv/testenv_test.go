package testenv

import (
	"regexp"
	"strings"
	"testing"
)

func TestNameAndUnique(t *testing.T) {
	t.Run("a/b c.d", func(t *testing.T) {
		if got := Name(t); got != "TestNameAndUnique-a-b-c-d" {
			t.Errorf("Name = %q", got)
		}
		u1, u2 := Unique(t, "q"), Unique(t, "q")
		if !regexp.MustCompile(`^q-TestNameAndUnique-a-b-c-d-[0-9a-f]{8}$`).MatchString(u1) || u1 == u2 {
			t.Errorf("Unique = %q, %q", u1, u2)
		}
	})
	t.Run(strings.Repeat("x", 100), func(t *testing.T) {
		if u := Unique(t, "q"); len(u) != len("q-")+60+len("-01234567") {
			t.Errorf("Unique of a long name = %q (%d bytes), want the name's last 60 characters", u, len(u))
		}
	})
}

func TestEventually(t *testing.T) {
	n := 0
	Eventually(t, "the third poll", func() bool { n++; return n == 3 })
	if n != 3 {
		t.Errorf("cond polled %d times, want 3", n)
	}
}
