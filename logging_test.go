package acemq_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
)

// logBuffer collects JSON log lines.
type logBuffer struct {
	mu  sync.Mutex
	buf bytes.Buffer
}

func (b *logBuffer) Write(p []byte) (int, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.Write(p)
}

// lines returns the records logged so far.
func (b *logBuffer) lines(t testing.TB) []map[string]any {
	t.Helper()
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []map[string]any
	for _, l := range strings.Split(strings.TrimSpace(b.buf.String()), "\n") {
		if l == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(l), &m); err != nil {
			t.Fatalf("a log line is not JSON: %q", l)
		}
		out = append(out, m)
	}
	return out
}

func (b *logBuffer) find(t testing.TB, msgPart string) map[string]any {
	for _, l := range b.lines(t) {
		if strings.Contains(l["msg"].(string), msgPart) {
			return l
		}
	}
	return nil
}

func (b *logBuffer) String() string {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.buf.String()
}

func newLog() (*logBuffer, *slog.Logger) {
	b := &logBuffer{}
	return b, slog.New(slog.NewJSONHandler(b, &slog.HandlerOptions{Level: slog.LevelDebug}))
}

// TestLoggerLogsOperatorEventsOnly: a consumer that stops and a set-aside
// that fails are logged; accepted, retried and dead-lettered messages are
// not; the URL is logged without its password.
func TestLoggerLogsOperatorEventsOnly(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		logs, l := newLog()
		r := newPipeRig(t, url, acemq.WithLogger(l), acemq.WithName("logged"))
		k := r.consume(func(_ context.Context, m acemq.Message[string]) acemq.Ack {
			switch m.Payload {
			case "reject":
				return acemq.Reject(errors.New("no"))
			case "retry":
				return acemq.Retry(errors.New("later"))
			}
			return acemq.Accept()
		})
		for _, b := range []string{"ok", "reject", "retry"} {
			r.send(b)
		}
		r.rec.Wait(t, 3)
		if got := logs.lines(t); len(got) != 0 {
			t.Errorf("settling messages logged %v", got)
		}
		// A missing .dlq: the set-aside fails and is logged.
		if _, err := brokertest.Driver(r.c).DeleteQueue(context.Background(), contract.DeadLetterQueue(r.q)); err != nil {
			t.Fatal(err)
		}
		env := r.send("reject")
		testenv.Eventually(t, "the failed set-aside logged", func() bool { return logs.find(t, "could not be set aside") != nil })
		line := logs.find(t, "could not be set aside")
		if line["level"] != "ERROR" || line["queue"] != r.q || line["target"] != contract.DeadLetterQueue(r.q) || line["message.id"] != env.ID() || line["acemq.connection"] != "logged" {
			t.Errorf("logged %v", line)
		}
		if u, _ := line["acemq.url"].(string); u == "" || strings.Contains(u, ":guest@") {
			t.Errorf("the URL logged is %q", u)
		}
		// Stop the set-aside loop, then delete the queue: the consumer's
		// subscription ends without Close.
		if err := k.Pause(context.Background()); err != nil {
			t.Fatal(err)
		}
		if err := k.Resume(context.Background()); err != nil {
			t.Fatal(err)
		}
		if logs.find(t, "the consumer is paused") == nil || logs.find(t, "the consumer resumed") == nil {
			t.Errorf("pause and resume were not logged: %s", logs)
		}
		if _, err := brokertest.Driver(r.c).DeleteQueue(context.Background(), r.q); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the stopped consumer logged", func() bool { return logs.find(t, "the consumer stopped") != nil })
		if line := logs.find(t, "the consumer stopped"); line["level"] != "ERROR" || line["queue"] != r.q {
			t.Errorf("logged %v", line)
		}
		if strings.Contains(logs.String(), "guest:guest") {
			t.Errorf("a password reached the log: %s", logs)
		}
	})
}

// TestNoLoggerPrintsNothing: without WithLogger the library logs nothing,
// not even through slog's default logger.
func TestNoLoggerPrintsNothing(t *testing.T) {
	logs, l := newLog()
	prev := slog.Default()
	slog.SetDefault(l)
	t.Cleanup(func() { slog.SetDefault(prev) })
	r := newPipeRig(t, brokertest.MemoryURL(t))
	k := r.consume(func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() })
	if err := k.Pause(context.Background()); err != nil {
		t.Fatal(err)
	}
	if _, err := brokertest.Driver(r.c).DeleteQueue(context.Background(), r.q); err != nil {
		t.Fatal(err)
	}
	// A failed Resume is returned, not logged.
	if err := k.Resume(context.Background()); err == nil {
		t.Error("resumed on a deleted queue")
	}
	if s := logs.String(); s != "" {
		t.Errorf("a connection without a logger logged: %s", s)
	}
}
