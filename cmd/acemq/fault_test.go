package main

import (
	"context"
	"github.com/acemq/acemq/queues"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/testenv"
)

// TestFaultPublishCountThroughRecovery closes every connection on the
// broker while publish --count is sending: the command must ride through
// the recovery and still report every copy confirmed.
func TestFaultPublishCountThroughRecovery(t *testing.T) {
	testenv.Faults(t)
	testenv.RequireCtl(t)
	conn, url := brokerConn(t)
	q := testQueue(t, conn, "fault-count")
	const n = 50000
	pub := startCLI(t, "publish", "--url", url, "--exchange", "", "--routing-key", q, "--count", "50000", "--timeout", "3m", "payload")
	eventually(t, "publishing to be under way", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		info, err := queues.Inspect(ctx, conn, q)
		return err == nil && info.Messages > 1000
	})
	if _, err := testenv.Ctl("close_all_connections", "acemq cli fault test"); err != nil {
		t.Fatalf("%v", err)
	}
	select {
	case <-pub.done:
	case <-time.After(4 * time.Minute):
		t.Fatal("publish --count did not finish")
	}
	if code := pub.cmd.ProcessState.ExitCode(); code != 0 {
		t.Fatalf("publish exited %d\nstderr:\n%s", code, pub.stderr)
	}
	t.Logf("publish said: %s", strings.TrimSpace(pub.stderr.String()))
	if !strings.Contains(pub.stderr.String(), "confirmed 50000 of 50000") {
		t.Errorf("stderr: %s", pub.stderr)
	}
	if ids := strings.Count(pub.stdout.String(), "\n"); ids != n {
		t.Errorf("printed %d ids, want %d", ids, n)
	}
	eventually(t, "every copy on the queue", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		info, err := queues.Inspect(ctx, conn, q)
		return err == nil && info.Messages >= n
	})
}
