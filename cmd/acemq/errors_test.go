package main

import (
	"bytes"
	"context"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/cli"
)

// The command prints an error as it is, after its own name once: a library
// error that begins with acemq: is not given a second one, and each package
// a chain went through is named once.
func TestErrorsNameEachPackageOnce(t *testing.T) {
	for _, c := range []struct {
		args  []string
		names []string
	}{
		{[]string{"queue", "declare", "q", "--retry", "fixed(0, 1s)", "--dry-run"}, []string{"acemq"}},
		{[]string{"queue", "declare", "q", "--url", "nosuch://h"}, []string{"acemq", "driver"}},
		{[]string{"outbox", "frob"}, []string{"acemq"}},
	} {
		var stdout, stderr bytes.Buffer
		if code := run(context.Background(), c.args, strings.NewReader(""), &stdout, &stderr); code != cli.ExitFailure {
			t.Errorf("acemq %s: exit %d, want %d", strings.Join(c.args, " "), code, cli.ExitFailure)
		}
		line := stderr.String()
		if !strings.HasPrefix(line, "acemq: ") || strings.Count(line, "\n") != 1 {
			t.Errorf("acemq %s: stderr %q, want one line beginning acemq:", strings.Join(c.args, " "), line)
		}
		for _, n := range c.names {
			if k := strings.Count(line, n+": "); k != 1 {
				t.Errorf("acemq %s: stderr %q says %s: %d times, want once", strings.Join(c.args, " "), line, n, k)
			}
		}
	}
}
