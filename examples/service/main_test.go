package main

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/actuator"
	"github.com/acemq/acemq/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestRun runs the service for a moment: it publishes, consumes and stops
// by itself.
func TestRun(t *testing.T) {
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-url", brokerURL(t), "-for", "300ms", "-every", "20ms"}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	for _, want := range []string{"msg=ready", "msg=published", "outcome=acked", `cause="ran for 300ms (-for)"`, "msg=stopped"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("the output has no %s:\n%s", want, out.String())
		}
	}
}

// TestMetrics asks the actuator endpoints for the service's health while it
// runs.
func TestMetrics(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	out := &syncBuffer{}
	done := start(ctx, out, "-url", brokerURL(t), "-every", "20ms", "-metrics", "127.0.0.1:0")
	line := out.waitFor(t, "msg=ready")
	m := regexp.MustCompile(`addr=(\S+)`).FindStringSubmatch(line)
	if m == nil {
		t.Fatalf("the service did not say where it serves the endpoints:\n%s", out)
	}

	client := &http.Client{Timeout: 5 * time.Second}
	res, err := client.Get("http://" + m[1] + actuator.PathHealth)
	if err != nil {
		t.Fatal(err)
	}
	var health struct{ Status string }
	err = json.NewDecoder(res.Body).Decode(&health)
	if cerr := res.Body.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		t.Fatal(err)
	}
	if res.StatusCode != http.StatusOK || health.Status != "up" {
		t.Errorf("GET %s: %s, status %q; want 200 OK, up", actuator.PathHealth, res.Status, health.Status)
	}
	client.CloseIdleConnections()

	cancel()
	if err := wait(t, done); err != nil {
		t.Fatalf("%v\n%s", err, out)
	}
}

// brokerURL is a memory:// broker of the test's own.
func brokerURL(t *testing.T) string {
	url := "memory://" + t.Name()
	t.Cleanup(func() { memory.Reset(url) })
	return url
}

// start runs the service in the background; wait collects its error.
func start(ctx context.Context, out *syncBuffer, args ...string) <-chan error {
	done := make(chan error, 1)
	go func() { done <- run(ctx, args, out) }()
	return done
}

func wait(t *testing.T, done <-chan error) error {
	t.Helper()
	select {
	case err := <-done:
		return err
	case <-time.After(10 * time.Second):
		t.Fatal("the service did not stop within 10s")
		return nil
	}
}

// syncBuffer is the service's output, read while it runs.
type syncBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *syncBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

func (b *syncBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

// waitFor waits until the output holds s and returns everything written
// until then.
func (b *syncBuffer) waitFor(t *testing.T, s string) string {
	t.Helper()
	for deadline := time.Now().Add(10 * time.Second); time.Now().Before(deadline); time.Sleep(5 * time.Millisecond) {
		if out := b.String(); strings.Contains(out, s) {
			return out
		}
	}
	t.Fatalf("the output has no %s within 10s:\n%s", s, b)
	return ""
}
