package reliability

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	_ "github.com/acemq/acemq/rabbitmq" // amqp:// and amqps://
)

// full reports whether the long form of the load scenarios was asked for.
func full() bool { return os.Getenv("ACEMQ_RELIABILITY_FULL") == "1" }

// uniqueName is a queue name no other test run uses.
func uniqueName(prefix string) string {
	var b [5]byte
	_, _ = rand.Read(b[:])
	return "acemq-reliability-" + prefix + "-" + hex.EncodeToString(b[:])
}

// connect opens a connection closed at cleanup.
func connect(t testing.TB, url, name string, opts ...acemq.ConnOption) *acemq.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, url, append([]acemq.ConnOption{acemq.WithName(name)}, opts...)...)
	if err != nil {
		t.Fatalf("connecting to %s: %v", url, err)
	}
	t.Cleanup(func() { closeConn(t, c) })
	return c
}

func closeConn(t testing.TB, c *acemq.Conn) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Logf("closing %s: %v", c.Name(), err)
	}
}

// deleteQueuesAtCleanup deletes the queues, on a connection of its own, when
// the test ends.
func deleteQueuesAtCleanup(t testing.TB, url string, names ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		c, err := acemq.Connect(ctx, url, acemq.WithName("acemq-reliability-cleanup"))
		if err != nil {
			t.Logf("cleanup: %v", err)
			return
		}
		defer func() { _ = c.Close(ctx) }()
		for _, n := range names {
			if _, err := brokertest.Driver(c).DeleteQueue(ctx, n); err != nil && !errors.Is(err, driver.ErrNotFound) {
				t.Logf("cleanup: deleting %s: %v", n, err)
			}
		}
	})
}

// poll calls cond every 50 ms until it holds, failing the test when it has
// not after timeout.
func poll(t testing.TB, what string, timeout time.Duration, cond func() bool) {
	t.Helper()
	if !pollFor(timeout, cond) {
		t.Fatalf("gave up after %s waiting for %s", timeout, what)
	}
}

// pollFor reports whether cond held within timeout.
func pollFor(timeout time.Duration, cond func() bool) bool {
	deadline := time.Now().Add(timeout)
	for {
		if cond() {
			return true
		}
		if time.Now().After(deadline) {
			return false
		}
		time.Sleep(50 * time.Millisecond)
	}
}

// sleepCtx sleeps for d or until ctx ends, reporting whether it slept fully.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// rabbitmqctl runs rabbitmqctl against the broker under test
// (testenv.Ctl) with a bounded time and returns its output.
func rabbitmqctl(args ...string) (string, error) { return testenv.Ctl(args...) }

// faults skips unless fault tests were asked for; it fails the test when
// no command controls the broker under test (testenv.CtlCommand),
// and registers the broker's restoration, which runs even when the test
// fails. Call it first in every TestFault… test.
func faults(t *testing.T) string {
	t.Helper()
	testenv.Faults(t)
	url := testenv.AMQPURL(t)
	if _, err := testenv.CtlCommand(); err != nil {
		t.Fatalf("a fault test controls the broker under test: %v", err)
	}
	t.Cleanup(func() { restoreBroker(t, url) })
	return url
}

// restoreBroker starts the broker's application (a no-op when it runs),
// clears any memory alarm and waits until the broker accepts a connection.
func restoreBroker(t testing.TB, url string) {
	if _, err := rabbitmqctl("start_app"); err != nil {
		t.Errorf("restoring the broker: %v", err)
	}
	if _, err := rabbitmqctl("set_vm_memory_high_watermark", "0.4"); err != nil {
		t.Errorf("restoring the broker: %v", err)
	}
	if _, err := rabbitmqctl("await_startup", "--timeout", "60"); err != nil {
		t.Errorf("restoring the broker: %v", err)
	}
	if !pollFor(90*time.Second, func() bool { return brokerAnswers(url) }) {
		t.Errorf("the broker at %s did not answer within 90 s after being restored", driver.RedactURL(url))
	}
}

// brokerAnswers reports whether a connection can be opened and pinged.
func brokerAnswers(url string) bool {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, url, acemq.WithName("acemq-reliability-probe"))
	if err != nil {
		return false
	}
	defer func() { _ = c.Close(ctx) }()
	return brokertest.Driver(c).Ping(ctx) == nil
}

// figures is one scenario's RESULT line: key=value pairs in the order added.
type figures struct {
	scenario string
	keys     []string
	vals     []string
}

func newFigures(scenario string) *figures { return &figures{scenario: scenario} }

func (f *figures) add(k string, v any) *figures {
	var s string
	switch x := v.(type) {
	case time.Duration:
		s = fmt.Sprintf("%.1fs", x.Seconds())
	default:
		s = fmt.Sprint(x)
	}
	f.keys = append(f.keys, k)
	f.vals = append(f.vals, strings.ReplaceAll(s, " ", "_"))
	return f
}

func (f *figures) String() string {
	var b strings.Builder
	b.WriteString("RESULT scenario=")
	b.WriteString(f.scenario)
	for i, k := range f.keys {
		fmt.Fprintf(&b, " %s=%s", k, f.vals[i])
	}
	return b.String()
}

// log writes the RESULT line to the test log and, when ACEMQ_RELIABILITY_OUT
// names a file, appends it there (docs/reliability.md is built from it).
func (f *figures) log(t testing.TB) {
	t.Helper()
	line := f.String()
	t.Log(line)
	if p := os.Getenv("ACEMQ_RELIABILITY_OUT"); p != "" {
		fh, err := os.OpenFile(p, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			t.Logf("writing %s: %v", p, err)
			return
		}
		defer fh.Close()
		fmt.Fprintln(fh, line)
	}
}
