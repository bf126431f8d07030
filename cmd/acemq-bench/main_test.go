package main

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/testenv"
	"go.uber.org/goleak"
)

// benchBinary is the acemq-bench command built once for the tests.
var benchBinary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "acemq-bench-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	benchBinary = filepath.Join(dir, "acemq-bench")
	build := exec.Command("go", "build", "-o", benchBinary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building acemq-bench:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// result is one run of the benchBinary.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the benchBinary with args and stdin, within a deadline.
func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, benchBinary, args...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running acemq-bench %s: %v", strings.Join(args, " "), err)
		}
		r.code = ee.ExitCode()
	}
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
