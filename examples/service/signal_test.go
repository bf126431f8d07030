//go:build unix

package main

import (
	"context"
	"strings"
	"syscall"
	"testing"
)

// TestSignal stops the service with SIGTERM, as an orchestrator would.
func TestSignal(t *testing.T) {
	out := &syncBuffer{}
	done := start(context.Background(), out, "-url", brokerURL(t), "-every", "20ms")
	out.waitFor(t, "msg=ready")
	if err := syscall.Kill(syscall.Getpid(), syscall.SIGTERM); err != nil {
		t.Fatal(err)
	}
	if err := wait(t, done); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
	for _, want := range []string{`cause="terminated signal received"`, "msg=stopped"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output has no %s:\n%s", want, out)
		}
	}
}
