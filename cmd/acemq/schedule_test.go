package main

import (
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/topology"
)

// TestPublishDelayAndServeScheduler: publish --delay and --at print the
// id; serve --scheduler delivers both with those ids, and reports what it
// handled when stopped.
func TestPublishDelayAndServeScheduler(t *testing.T) {
	conn, url := brokerConn(t)
	q := testQueue(t, conn, "sched")
	id1 := strings.TrimSpace(runCLI(t, "", "publish", "--url", url, "--exchange", "", "--routing-key", q, "--delay", "1500ms", `{"n":1}`).wantCode(t, 0).stdout)
	at := time.Now().Add(2 * time.Second).UTC().Format(time.RFC3339)
	r := runCLI(t, "", "publish", "--url", url, "--exchange", "", "--routing-key", q, "--at", at, `{"n":2}`).wantCode(t, 0)
	id2 := strings.TrimSpace(r.stdout)
	if len(id1) != 36 || len(id2) != 36 {
		t.Fatalf("publish --delay/--at printed %q and %q, want message ids", id1, id2)
	}
	b := startCLI(t, "serve", "--scheduler", "--url", url, "--json")
	eventually(t, "both scheduled messages delivered", func() bool { return queueDepth(t, conn, q) == 2 })
	got := map[string]string{}
	for range 2 {
		d := brokertest.Get(t, conn, q)
		got[d.MessageID] = string(d.Body)
	}
	if got[id1] != `{"n":1}` || got[id2] != `{"n":2}` {
		t.Errorf("delivered %v, want %s and %s", got, id1, id2)
	}
	if code := b.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("serve --scheduler exited %d\nstderr:\n%s", code, b.stderr)
	}
	if lines := jsonLines(t, b.stdout.String()); len(lines) != 1 || lines[0]["handled"] == nil {
		t.Errorf("serve --scheduler --json printed %q", b.stdout)
	}
}

// TestPublishTTLDeadLetters: --ttl expires the message and the broker
// dead-letters it.
func TestPublishTTLDeadLetters(t *testing.T) {
	conn, url := brokerConn(t)
	q := "acemq-cli-test.ttl." + cli.Suffix()
	deleteAtEnd(t, conn, q, contract.DeadLetterQueue(q), contract.ParkedQueue(q))
	if err := topology.New().Queue(q, topology.WithQueueType(topology.QueueClassic), topology.WithDeadLettering(true)).Apply(t.Context(), conn); err != nil {
		t.Fatal(err)
	}
	id := strings.TrimSpace(runCLI(t, "", "publish", "--url", url, "--exchange", "", "--routing-key", q, "--ttl", "50ms", "--priority", "3", `{"n":1}`).wantCode(t, 0).stdout)
	d := brokertest.Get(t, conn, contract.DeadLetterQueue(q))
	if d.MessageID != id || d.Priority != 3 {
		t.Errorf("dead-lettered %s priority %d, want %s priority 3", d.MessageID, d.Priority, id)
	}
}

func TestPublishTimeFlagMistakes(t *testing.T) {
	for _, args := range [][]string{
		{"--priority", "256"},
		{"--ttl", "-1s"},
		{"--delay", "10s", "--at", "2026-12-01T09:00:00Z"},
		{"--at", "tomorrow"},
		{"--delay", "10s", "--ttl", "5s"},
		{"--count", "2", "--priority", "1"},
	} {
		all := append([]string{"publish", "--url", "memory://x", "--exchange", "", "--routing-key", "q"}, args...)
		r := runCLI(t, "", append(all, "{}")...)
		if r.code != cli.ExitFailure || r.stderr == "" {
			t.Errorf("publish %v: exit %d, stderr %q; want 1 with a reason", args, r.code, r.stderr)
		}
	}
	r := runCLI(t, "", "serve", "--scheduler", "--queue", "q")
	if r.code != cli.ExitFailure || !strings.Contains(r.stderr, "--scheduler takes neither") {
		t.Errorf("serve --scheduler --queue: exit %d, stderr %q", r.code, r.stderr)
	}
}
