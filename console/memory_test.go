package console_test

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"runtime"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/console"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/topology"
)

// heapPeak records the most heap in use, after a collection, at each call
// of its hook.
type heapPeak struct{ base, peak uint64 }

func (h *heapPeak) sample() {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.peak = max(h.peak, ms.HeapAlloc)
}

// growth is the peak above the heap in use when the measure started.
func (h *heapPeak) growth() int64 { return int64(h.peak) - int64(h.base) }

func measureHeap(t *testing.T) *heapPeak {
	h := &heapPeak{}
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	h.base = ms.HeapAlloc
	t.Cleanup(console.SetReadHook(h.sample))
	return h
}

// bigDeadLetters puts n messages of size bytes each on a new queue's .dlq.
func bigDeadLetters(t *testing.T, url string, n, size int) (*acemq.Conn, string) {
	t.Helper()
	ctx := context.Background()
	conn := brokertest.Connect(t, url)
	q := "big.orders"
	if !strings.HasPrefix(url, "memory://") {
		q = testenv.Unique(t, "console") + ".big"
	}
	topo := topology.New().Queue(q, topology.WithDeadLettering(true))
	if err := topo.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = topo.Delete(context.Background(), conn) })
	dlq := contract.DeadLetterQueue(q)
	for i := range n {
		body := bytes.Repeat([]byte{'a' + byte(i%26)}, size)
		env := acemq.MustEnvelope(acemq.Fields{Type: "order.placed", Reason: fmt.Sprintf("TooBigError: order %d is too big", i)})
		if err := brokertest.Publish(ctx, conn, brokertest.Outbound{RoutingKey: dlq, Envelope: env, ContentType: "text/plain", Body: body, AlwaysConfirm: true}); err != nil {
			t.Fatal(err)
		}
	}
	testenv.Eventually(t, "every message on "+dlq, func() bool { return brokertest.Depth(t, conn, dlq) == n })
	return conn, dlq
}

// countingWriter is a ResponseWriter that keeps nothing of the body.
type countingWriter struct {
	h      http.Header
	status int
	n      int64
	lines  int
}

func (w *countingWriter) Header() http.Header { return w.h }
func (w *countingWriter) WriteHeader(s int) {
	if w.status == 0 {
		w.status = s
	}
}
func (w *countingWriter) Write(p []byte) (int, error) {
	w.WriteHeader(http.StatusOK)
	w.n += int64(len(p))
	w.lines += bytes.Count(p, []byte{'\n'})
	return len(p), nil
}

// A look at a queue, a message's page and an export hold about one body at
// a time, not the queue's bytes: 32 dead letters of 1 MiB raise the heap
// by far less than 32 MiB while each is read.
func TestLookMemoryIsBounded(t *testing.T) {
	const n, size = 32, 1 << 20
	// Reading one body costs a few copies of it (the driver's buffer, the
	// delivery); the queue's bytes are n times that.
	const bound = 8 * size
	brokertest.Each(t, func(t *testing.T, url string) {
		conn, dlq := bigDeadLetters(t, url, n, size)
		con, err := console.New(conn, console.WithQueues(dlq))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = con.Close() })
		csrf := guardOf(t, con)
		call := func(path, body string) *countingWriter {
			method := "GET"
			if body != "" {
				method = "POST"
			}
			req, _ := http.NewRequest(method, "http://127.0.0.1"+path, strings.NewReader(body))
			req.Header.Set("X-Acemq-Console", csrf)
			w := &countingWriter{h: http.Header{}}
			con.ServeHTTP(w, req)
			return w
		}

		h := measureHeap(t)
		if w := call("/api/queues/"+dlq, ""); w.status != 200 {
			t.Fatalf("view: %d", w.status)
		}
		t.Logf("a look at %d messages of %d bytes: heap +%d bytes at most", n, size, h.growth())
		if g := h.growth(); g > bound {
			t.Errorf("a look at %d messages of %d bytes raised the heap by %d bytes while it ran, more than %d", n, size, g, bound)
		}

		h = measureHeap(t)
		w := call("/api/queues/"+dlq+"/export", `{"all":true}`)
		if w.status != 200 || w.lines != n || w.n < n*size {
			t.Fatalf("export: %d, %d lines, %d bytes", w.status, w.lines, w.n)
		}
		t.Logf("an export of %d messages of %d bytes: heap +%d bytes at most", n, size, h.growth())
		if g := h.growth(); g > bound {
			t.Errorf("exporting %d messages of %d bytes raised the heap by %d bytes while it ran, more than %d", n, size, g, bound)
		}
		testenv.Eventually(t, "the messages back on "+dlq, func() bool { return brokertest.Depth(t, conn, dlq) == n })
	})
}

// guardOf reads the cross-site guard off a console's page.
func guardOf(t *testing.T, con *console.Console) string {
	req, _ := http.NewRequest("GET", "http://127.0.0.1/", nil)
	w := &pageWriter{countingWriter: countingWriter{h: http.Header{}}}
	con.ServeHTTP(w, req)
	_, rest, ok := strings.Cut(w.buf.String(), `name="acemq-console" content="`)
	if !ok {
		t.Fatalf("the page carries no guard")
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

type pageWriter struct {
	countingWriter
	buf bytes.Buffer
}

func (w *pageWriter) Write(p []byte) (int, error) { w.buf.Write(p); return len(p), nil }

var _ io.Writer = (*pageWriter)(nil)

// A look keeps the summaries of what it read within the peek budget, and
// says when the budget stopped it: 300 dead letters with reasons of 1000
// bytes each fill a 64 KiB budget long before the peek limit.
func TestPeekBudget(t *testing.T) {
	const n, budget = 300, 64 << 10
	url := brokertest.MemoryURL(t)
	ctx := context.Background()
	conn := brokertest.Connect(t, url)
	q := "long.reasons"
	if err := topology.New().Queue(q, topology.WithDeadLettering(true)).Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	dlq := contract.DeadLetterQueue(q)
	for i := range n {
		reason := fmt.Sprintf("LongError %d: %s", i, strings.Repeat("x", 1000))
		env := acemq.MustEnvelope(acemq.Fields{Type: "order.placed", Reason: reason})
		if err := brokertest.Publish(ctx, conn, brokertest.Outbound{RoutingKey: dlq, Envelope: env, Body: []byte("{}")}); err != nil {
			t.Fatal(err)
		}
	}
	if _, err := console.New(conn, console.WithPeekBudget(1000)); err == nil {
		t.Error("a peek budget of 1000 bytes was accepted")
	}
	c := serve(t, conn, console.WithQueues(q), console.WithPeekBudget(budget))
	var v struct {
		view
		Truncated     bool `json:"truncated"`
		BudgetReached bool `json:"budgetReached"`
		PeekBudget    int  `json:"peekBudget"`
	}
	req, _ := http.NewRequest("GET", c.srv.URL+"/api/queues/"+dlq, nil)
	req.Header.Set("X-Acemq-Console", c.csrf)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if err := json.Unmarshal(body, &v); err != nil {
		t.Fatalf("%d %s: %v", resp.StatusCode, body, err)
	}
	if !v.Truncated || !v.BudgetReached || v.PeekBudget != budget || v.Peeked == 0 || v.Peeked >= n {
		t.Fatalf("peeked %d of %d, truncated %v, budget reached %v, budget %d", v.Peeked, n, v.Truncated, v.BudgetReached, v.PeekBudget)
	}
	// What the view holds is what it answers: its JSON stays within the
	// budget.
	if len(body) > budget {
		t.Errorf("the view is %d bytes, over the budget of %d", len(body), budget)
	}
	held := 0
	for _, g := range v.Groups {
		held += len(g.Messages)
	}
	if held != v.Peeked {
		t.Errorf("%d summaries for %d messages peeked", held, v.Peeked)
	}
	if d := brokertest.Depth(t, conn, dlq); d != n {
		t.Errorf("%d messages on %s after the look, want %d", d, dlq, n)
	}
}

// An export that fails after its first line is broken off, so that the
// download fails rather than ends short looking whole.
func TestExportFailingHalfWayIsBrokenOff(t *testing.T) {
	url := brokertest.MemoryURL(t)
	conn, dlq := bigDeadLetters(t, url, 4, 8<<10) // past the server's 4 KiB buffer
	c := serve(t, conn, console.WithQueues(dlq))
	reads := 0
	t.Cleanup(console.SetReadHook(func() {
		if reads++; reads == 3 { // two messages read and written
			_ = conn.Close(context.Background())
		}
	}))
	req, _ := http.NewRequest("POST", c.srv.URL+"/api/queues/"+dlq+"/export", strings.NewReader(`{"all":true}`))
	req.Header.Set("X-Acemq-Console", c.csrf)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		return // broken off before the first lines left the server's buffer
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(resp.Body)
	if resp.StatusCode != 200 || err == nil || resp.Trailer.Get("X-Acemq-Exported") != "" {
		t.Fatalf("status %d, read error %v, trailer %q after %d bytes: want the response broken off", resp.StatusCode, err, resp.Trailer.Get("X-Acemq-Exported"), len(body))
	}
}
