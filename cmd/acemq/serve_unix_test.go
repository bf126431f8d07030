//go:build unix

package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/cli"
)

// TestServeCtrlCLetsRunningCommandsFinish sends SIGINT to serve's whole
// process group, as a terminal's Ctrl-C does, while a command is running:
// the command must not be interrupted, its caller gets the answer, and
// serve drains and exits 0.
func TestServeCtrlCLetsRunningCommandsFinish(t *testing.T) {
	conn, url := brokerConn(t)
	q := "acemq-cli-test.ctrlc." + cli.Suffix()
	deleteAtEnd(t, conn, q, contract.DeadLetterQueue(q), contract.ParkedQueue(q))
	srv := startCLIGroup(t, "serve", "--url", url, "--queue", q, "--declare", "--", "sh", "-c", "echo running-now >&2; sleep 1; echo finished")
	waitConsumers(t, conn, q, 1, srv)

	ask := startCLI(t, "ask", "--url", url, "--exchange", "", "--routing-key", q, "--timeout", "30s", "x")
	eventually(t, "the command to start", func() bool { return strings.Contains(srv.stderr.String(), "\nrunning-now") })
	if err := syscall.Kill(-srv.cmd.Process.Pid, syscall.SIGINT); err != nil {
		t.Fatal(err)
	}
	select {
	case <-ask.done:
	case <-time.After(30 * time.Second):
		t.Fatalf("ask did not finish\nserve stdout: %s\nserve stderr: %s\nask stderr: %s", srv.stdout, srv.stderr, ask.stderr)
	}
	if code := ask.cmd.ProcessState.ExitCode(); code != 0 || strings.TrimSpace(ask.stdout.String()) != "finished" {
		t.Errorf("ask exited %d with %q, stderr %q", code, ask.stdout, ask.stderr)
	}
	select {
	case <-srv.done:
	case <-time.After(30 * time.Second):
		t.Fatal("serve did not stop")
	}
	if code := srv.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(srv.stdout.String(), "answered 1, failed 0") {
		t.Errorf("serve exited %d, stdout %q, stderr %q", code, srv.stdout, srv.stderr)
	}
}

// startCLIGroup starts the binary as the leader of a process group, as a
// shell starts a foreground job.
func startCLIGroup(t *testing.T, args ...string) *background {
	t.Helper()
	return startCLIWith(t, func(b *background) { b.cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true} }, args...)
}
