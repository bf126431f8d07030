package main

import (
	"net"
	"net/url"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/testenv"
)

// brokerLater returns a URL to the test broker on a port where nothing
// listens yet, and the forwarder that, once started, makes it answer.
func brokerLater(t *testing.T, brokerURL string) (string, func()) {
	t.Helper()
	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	backend := u.Host
	if u.Port() == "" {
		backend = net.JoinHostPort(u.Hostname(), "5672")
	}
	addr := testenv.FreeAddr(t)
	u.Host = addr
	var fw testenv.Forwarder
	t.Cleanup(fw.Close)
	return u.String(), func() { fw.Start(t, addr, backend) }
}

// TestConsumeWaitsForTheBroker: consume --wait-for-broker started before
// its broker reports each failed attempt and reads once the broker is up.
func TestConsumeWaitsForTheBroker(t *testing.T) {
	conn, brokerURL := brokerConn(t)
	q := testQueue(t, conn, "wait")
	runCLI(t, "", "publish", "--url", brokerURL, "--exchange", "", "--routing-key", q, "hello").wantCode(t, 0)

	late, start := brokerLater(t, brokerURL)
	b := startCLI(t, "consume", "--url", late, "--wait-for-broker", "2m", "--queue", q, "--count", "1")
	eventually(t, "a report of the failed attempt", func() bool {
		return strings.Contains(b.stderr.String(), "waiting for the broker (attempt 1 failed")
	})
	start()
	select {
	case <-b.done:
	case <-time.After(90 * time.Second):
		t.Fatalf("consume did not finish once the broker was up\nstderr:\n%s", b.stderr)
	}
	if code := b.cmd.ProcessState.ExitCode(); code != 0 || !strings.Contains(b.stdout.String(), "hello") {
		t.Errorf("exit %d, stdout %q, stderr:\n%s", code, b.stdout, b.stderr)
	}
	if strings.Contains(b.stderr.String(), ":guest@") {
		t.Errorf("stderr shows the password:\n%s", b.stderr)
	}
}

// TestWaitForBrokerGivesUp: a broker that never comes ends the wait with
// exit 1, the last attempt's error and the attempts reported; a refused
// login ends it at once.
func TestWaitForBrokerGivesUp(t *testing.T) {
	_, brokerURL := brokerConn(t)
	late, _ := brokerLater(t, brokerURL)
	r := runCLI(t, "", "consume", "--url", late, "--wait-for-broker", "1500ms", "--queue", "acemq-cli-test.none").wantCode(t, 1)
	for _, want := range []string{"waiting for the broker (attempt 1 failed", "gave up waiting for the broker", "connection refused"} {
		if !strings.Contains(r.stderr, want) {
			t.Errorf("stderr lacks %q:\n%s", want, r.stderr)
		}
	}

	u, err := url.Parse(brokerURL)
	if err != nil {
		t.Fatal(err)
	}
	u.User = url.UserPassword(u.User.Username(), "wrong-password")
	start := time.Now()
	r = runCLI(t, "", "serve", "--url", u.String(), "--wait-for-broker", "10m", "--queue", "acemq-cli-test.none", "--", "cat").wantCode(t, 1)
	if strings.Contains(r.stderr, "waiting for the broker") || !strings.Contains(r.stderr, "403") {
		t.Errorf("a refused login was retried, or not reported:\n%s", r.stderr)
	}
	if d := time.Since(start); d > time.Minute {
		t.Errorf("a refused login took %s to report", d)
	}
	runCLI(t, "", "consume", "--url", late, "--wait-for-broker", "-1s", "--queue", "q").wantCode(t, 1)
}
