package main

import (
	"strings"
	"testing"
)

// The CLI's URL flags report a malformed URL without quoting its user
// information: `--url 'amqp://alice:Hunt/er2Secret@host:5672/'` once
// printed `invalid port ":Hunt" after host`.
func TestURLFlagsHideThePassword(t *testing.T) {
	const pw = "Hunt/er2Secret"
	for _, args := range [][]string{
		{"publish", "--url", "amqp://alice:" + pw + "@127.0.0.1:1/", "--exchange", "", "--routing-key", "q", "{}"},
		{"publish", "--url", "amqp://guest:guest@127.0.0.1:1/,amqp://alice:" + pw + "@127.0.0.1:1/", "--exchange", "", "--routing-key", "q", "{}"},
		{"console", "--url", "memory://x", "--listen", "127.0.0.1:0", "--management", "http://alice:" + pw + "@127.0.0.1:1/"},
	} {
		r := runCLI(t, "", args...).wantCode(t, 1)
		if !strings.Contains(r.stderr, "malformed URL") || !strings.Contains(r.stderr, "the password holds a '/'") {
			t.Errorf("%s: stderr does not say what is wrong: %q", args[0], r.stderr)
		}
		for _, part := range []string{"alice", "Hunt", "er2", "Secret"} {
			if strings.Contains(r.stderr+r.stdout, part) {
				t.Errorf("%s: the output quotes %q of the user information: %q", args[0], part, r.stderr)
			}
		}
	}
}
