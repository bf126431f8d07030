package testenv

import (
	"regexp"
	"runtime"
	"slices"
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

// recorder is a testing.TB that records the Skip or Fatalf of
// ClusterURLs instead of ending the test (the rest goes to the test); the caller runs the function under test on its own
// goroutine, since both call runtime.Goexit.
type recorder struct {
	testing.TB
	skipped, failed bool
}

func (r *recorder) Helper()               {}
func (r *recorder) Skip(...any)           { r.skipped = true; runtime.Goexit() }
func (r *recorder) Fatalf(string, ...any) { r.failed = true; runtime.Goexit() }

func clusterURLsWith(t *testing.T, gate, urls string) (got []string, r *recorder) {
	t.Setenv("ACEMQ_TEST_CLUSTER", gate)
	t.Setenv("ACEMQ_TEST_CLUSTER_URLS", urls)
	r = &recorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		got = ClusterURLs(r)
	}()
	<-done
	return got, r
}

// TestClusterURLs: without the gate a cluster test skips; with it, a
// short or missing list fails it (never a skip), and the list is split.
func TestClusterURLs(t *testing.T) {
	if _, r := clusterURLsWith(t, "", "amqp://a/,amqp://b/,amqp://c/"); !r.skipped || r.failed {
		t.Errorf("without ACEMQ_TEST_CLUSTER: skipped %v failed %v, want a skip", r.skipped, r.failed)
	}
	if _, r := clusterURLsWith(t, "1", ""); !r.failed || r.skipped {
		t.Errorf("the gate without URLs: skipped %v failed %v, want a failure", r.skipped, r.failed)
	}
	if _, r := clusterURLsWith(t, "1", "amqp://a/,amqp://b/"); !r.failed {
		t.Errorf("the gate with two URLs: not a failure")
	}
	got, r := clusterURLsWith(t, "1", " amqp://a/, amqp://b/ ,amqp://c/")
	if r.failed || r.skipped || !slices.Equal(got, []string{"amqp://a/", "amqp://b/", "amqp://c/"}) {
		t.Errorf("three URLs: %q (skipped %v failed %v)", got, r.skipped, r.failed)
	}
}
