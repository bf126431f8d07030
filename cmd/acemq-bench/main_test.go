package main

import (
	"context"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/cli/clitest"
	"github.com/acemq/acemq/internal/testenv"
)

// benchBinary is the acemq-bench command built once for the tests.
var benchBinary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int { return clitest.Main(m, "acemq-bench", &benchBinary) }

// result is one run of the benchBinary.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the benchBinary with args and stdin, within a deadline.
func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	var r result
	r.code, r.stdout, r.stderr = clitest.Run(t, benchBinary, nil, stdin, args...)
	return r
}

// wantCode fails the test unless r exited with code.
func (r result) wantCode(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// brokerConn connects the test process to RabbitMQ, for checking what the
// benchBinary left behind.
func brokerConn(t *testing.T) (*acemq.Conn, string) {
	t.Helper()
	url := testenv.AMQPURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := acemq.Connect(ctx, url, acemq.WithName("acemq-bench test"))
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
		defer cancel()
		_ = conn.Close(ctx)
	})
	return conn, url
}

// TestBrokerFlags: acemq-bench takes the broker and TLS flags acemq's
// commands that connect take, and its --help lists them.
func TestBrokerFlags(t *testing.T) {
	r := runCLI(t, "", "--help").wantCode(t, 0)
	for _, name := range []string{"url", "tls-ca", "tls-cert", "tls-key", "tls-allow-development"} {
		if newRootCmd().Flags().Lookup(name) == nil || !strings.Contains(r.stdout, "--"+name) {
			t.Errorf("acemq-bench --help lacks --%s:\n%s", name, r.stdout)
		}
	}
}
