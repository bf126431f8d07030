package main

import (
	"bytes"
	"context"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/cli/publish"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/topology"
)

// brokerConn connects the test process to RabbitMQ, for setting up and
// checking what the acemqBinary does.
func brokerConn(t *testing.T) (*acemq.Conn, string) {
	t.Helper()
	url := testenv.AMQPURL(t)
	ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
	defer cancel()
	conn, err := acemq.Connect(ctx, url, acemq.WithName("acemq cli test"))
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

// testQueue declares a uniquely named classic queue, deleted at the end.
func testQueue(t *testing.T, conn *acemq.Conn, prefix string) string {
	t.Helper()
	name := fmt.Sprintf("acemq-cli-test.%s.%s", prefix, cli.Suffix())
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	deleteAtEnd(t, conn, name)
	if err := topology.New().Queue(name, topology.WithQueueType(topology.QueueClassic)).Apply(ctx, conn); err != nil {
		t.Fatalf("declaring %s: %v", name, err)
	}
	return name
}

// deleteAtEnd deletes queues when the test ends.
func deleteAtEnd(t *testing.T, conn *acemq.Conn, names ...string) {
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		topo := topology.New()
		for _, n := range names {
			// Only the name counts for deleting. Without
			// WithDeadLettering(false) a quorum queue would bring its own
			// dead-letter half, and naming q and q.dlq together would be
			// refused as q.dlq declared twice.
			topo.Queue(n, topology.WithDeadLettering(false))
		}
		if err := topo.Delete(ctx, conn); err != nil {
			t.Errorf("deleting %v: %v", names, err)
		}
	})
}

// queueDepth is the number of ready messages in q.
func queueDepth(t *testing.T, conn *acemq.Conn, q string) int {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	info, err := queues.Inspect(ctx, conn, q)
	if err != nil {
		t.Fatalf("inspecting %s: %v", q, err)
	}
	return info.Messages
}

// eventually polls cond until it holds or a deadline passes.
func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("gave up waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestPublishAndConsumeJSON(t *testing.T) {
	conn, url := brokerConn(t)
	q := testQueue(t, conn, "pubcon")

	r := runCLI(t, "", "publish", "--url", url, "--exchange", "", "--routing-key", q,
		"--type", "order.placed", "--header", "x-tenant=acme", "--correlation-id", "corr-9", "--causation-id", "cause-9",
		`{"id":"o-1"}`).wantCode(t, 0)
	id := strings.TrimSpace(r.stdout)
	if len(id) != 36 {
		t.Fatalf("publish printed %q, want a message id", r.stdout)
	}
	// Body from standard input, not UTF-8.
	runCLI(t, "\xff\xfe\x00", "publish", "--url", url, "--exchange", "", "--routing-key", q, "-").wantCode(t, 0)

	// A look without taking: both come back, then are still there.
	look := jsonLines(t, runCLI(t, "", "consume", "--url", url, "--queue", q, "--requeue", "--json").wantCode(t, 0).stdout)
	if len(look) != 2 {
		t.Fatalf("consume --requeue read %d messages, want 2", len(look))
	}
	eventually(t, "the messages to be put back", func() bool { return queueDepth(t, conn, q) == 2 })

	lines := jsonLines(t, runCLI(t, "", "consume", "--url", url, "--queue", q, "--count", "2", "--json").wantCode(t, 0).stdout)
	if len(lines) != 2 {
		t.Fatalf("consume read %d messages, want 2", len(lines))
	}
	m := lines[0]
	for k, want := range map[string]any{
		"id": id, "type": "order.placed", "correlationId": "corr-9", "causationId": "cause-9",
		"attempt": json.Number("1"), "version": json.Number("1"), "routingKey": q, "exchange": "",
		"contentType": "application/json", "body": `{"id":"o-1"}`, "redelivered": true, "replyTo": "",
	} {
		if m[k] != want {
			t.Errorf("%s = %#v, want %#v", k, m[k], want)
		}
	}
	if h := m["headers"].(map[string]any); h["x-tenant"] != "acme" || len(h) != 1 {
		t.Errorf("headers = %v", h)
	}
	if _, ok := m["firstSeen"].(json.Number); !ok || !strings.HasPrefix(m["origin"].(string), "acemq@") {
		t.Errorf("firstSeen %v origin %v", m["firstSeen"], m["origin"])
	}
	// The keys decode prints come first, in its order.
	dec := parseObject(t, []byte(runCLI(t, `{"routingKey":"k"}`, "envelope", "decode").wantCode(t, 0).stdout))
	for k := range dec {
		if _, ok := m[k]; !ok {
			t.Errorf("consume --json lacks the envelope field %q", k)
		}
	}
	raw := lines[1]
	if raw["bodyBase64"] != base64.StdEncoding.EncodeToString([]byte("\xff\xfe\x00")) || raw["body"] != nil {
		t.Errorf("non-UTF-8 body printed as %v / %v", raw["body"], raw["bodyBase64"])
	}
	if raw["contentType"] != "application/octet-stream" {
		t.Errorf("content type %v", raw["contentType"])
	}
	if n := queueDepth(t, conn, q); n != 0 {
		t.Errorf("%d messages left after consume took them", n)
	}
}

func TestPublishUnroutableExitsFour(t *testing.T) {
	_, url := brokerConn(t)
	r := runCLI(t, "", "publish", "--url", url, "--exchange", "amq.direct", "--routing-key", "acemq-cli-test.nobody."+cli.Suffix(), "x").wantCode(t, 4)
	if !strings.Contains(r.stderr, "unroutable") || r.stdout != "" {
		t.Errorf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	runCLI(t, "", "publish", "--url", url, "--exchange", "amq.direct", "--routing-key", "acemq-cli-test.nobody."+cli.Suffix(), "--count", "3", "x").wantCode(t, 4)
}

func TestPublishRefusesReservedHeader(t *testing.T) {
	r := runCLI(t, "", "publish", "--url", "memory://x", "--exchange", "", "--routing-key", "q", "--header", "x-acemq-id=1", "x").wantCode(t, 1)
	if !strings.Contains(r.stderr, "x-acemq-id") {
		t.Errorf("stderr %q", r.stderr)
	}
	runCLI(t, "", "publish", "--routing-key", "q", "x").wantCode(t, 1) // --exchange is required
}

func TestPublishCount(t *testing.T) {
	conn, url := brokerConn(t)
	q := testQueue(t, conn, "count")
	r := runCLI(t, "", "publish", "--url", url, "--exchange", "", "--routing-key", q, "--count", "450", "hello").wantCode(t, 0)
	if ids := strings.Fields(r.stdout); len(ids) != 450 {
		t.Errorf("printed %d ids, want 450", len(ids))
	}
	if !strings.Contains(r.stderr, "confirmed 450 of 450") {
		t.Errorf("stderr %q", r.stderr)
	}
	eventually(t, "450 messages", func() bool { return queueDepth(t, conn, q) == 450 })
	lines := jsonLines(t, runCLI(t, "", "consume", "--url", url, "--queue", q, "--count", "3", "--json").wantCode(t, 0).stdout)
	for i, m := range lines {
		if got := m["headers"].(map[string]any)[publish.SeqHeader]; got != json.Number(fmt.Sprint(i+1)) {
			t.Errorf("message %d has %s = %v", i, publish.SeqHeader, got)
		}
	}
}

func TestConsumeTimeoutExitsThree(t *testing.T) {
	conn, url := brokerConn(t)
	q := testQueue(t, conn, "timeout")
	runCLI(t, "", "publish", "--url", url, "--exchange", "", "--routing-key", q, "one").wantCode(t, 0)
	r := runCLI(t, "", "consume", "--url", url, "--queue", q, "--count", "2", "--timeout", "500ms").wantCode(t, 3)
	if !strings.Contains(r.stdout, "one") || !strings.Contains(r.stderr, "timed out") {
		t.Errorf("stdout %q stderr %q", r.stdout, r.stderr)
	}
	// Empty queue without --count: nothing to read is success.
	runCLI(t, "", "consume", "--url", url, "--queue", q).wantCode(t, 0)
	runCLI(t, "", "consume", "--url", url, "--queue", q+".missing").wantCode(t, 1)
}

// background is a acemqBinary running while a test talks to it.
type background struct {
	cmd            *exec.Cmd
	stdout, stderr *syncBuffer
	done           chan struct{}
}

// syncBuffer is a bytes.Buffer safe to read while a process writes it.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}

// startCLI starts the acemqBinary in the background; it is killed at the end of
// the test if it is still running.
func startCLI(t *testing.T, args ...string) *background {
	t.Helper()
	return startCLIWith(t, nil, args...)
}

// startCLIWith is startCLI with a chance to adjust the command first.
func startCLIWith(t *testing.T, adjust func(*background), args ...string) *background {
	t.Helper()
	b := &background{cmd: exec.Command(acemqBinary, args...), stdout: &syncBuffer{}, stderr: &syncBuffer{}, done: make(chan struct{})}
	b.cmd.Stdout, b.cmd.Stderr = b.stdout, b.stderr
	if adjust != nil {
		adjust(b)
	}
	if err := b.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() { _ = b.cmd.Wait(); close(b.done) }()
	t.Cleanup(func() {
		select {
		case <-b.done:
		default:
			_ = b.cmd.Process.Kill()
			<-b.done
		}
	})
	return b
}

// stop sends sig and waits for the process to exit, returning its code.
func (b *background) stop(t *testing.T, sig os.Signal) int {
	t.Helper()
	if err := b.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-b.done:
	case <-time.After(60 * time.Second):
		t.Fatalf("the process did not stop after %v\nstderr:\n%s", sig, b.stderr)
	}
	return b.cmd.ProcessState.ExitCode()
}

// waitConsumers waits until q has n consumers.
func waitConsumers(t *testing.T, conn *acemq.Conn, q string, n int, b *background) {
	t.Helper()
	deadline := time.Now().Add(20 * time.Second)
	for {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		info, err := queues.Inspect(ctx, conn, q)
		cancel()
		if err == nil && info.Consumers == n {
			return
		}
		select {
		case <-b.done:
			t.Fatalf("the process exited early\nstdout:\n%s\nstderr:\n%s", b.stdout, b.stderr)
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s never had %d consumers (last %v, %v)\nstderr:\n%s", q, n, info, err, b.stderr)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

func TestServeAndAsk(t *testing.T) {
	conn, url := brokerConn(t)
	q := "acemq-cli-test.serve." + cli.Suffix()
	deleteAtEnd(t, conn, q, contract.DeadLetterQueue(q), contract.ParkedQueue(q))
	srv := startCLI(t, "serve", "--url", url, "--queue", q, "--declare", "--concurrency", "2", "--json", "--",
		"sh", "-c", `read body; if [ "$body" = fail ]; then echo "some detail" >&2; echo boom >&2; exit 1; fi; printf '%s/%s' "$body" "$ACEMQ_TYPE" | tr a-z A-Z`)
	waitConsumers(t, conn, q, 1, srv)

	r := runCLI(t, "", "ask", "--url", url, "--exchange", "", "--routing-key", q, "--type", "greeting", "--timeout", "20s", "hello").wantCode(t, 0)
	if r.stdout != "HELLO/GREETING" {
		t.Errorf("reply %q, want HELLO/GREETING", r.stdout)
	}
	r = runCLI(t, "fail\n", "ask", "--url", url, "--exchange", "", "--routing-key", q, "--timeout", "20s", "-").wantCode(t, 2)
	if !strings.Contains(r.stderr, "CommandError: boom") || strings.Contains(r.stderr, "some detail") || r.stdout != "" {
		t.Errorf("responder failure: stdout %q stderr %q", r.stdout, r.stderr)
	}
	eventually(t, "the failed request in the .dlq", func() bool { return queueDepth(t, conn, contract.DeadLetterQueue(q)) == 1 })

	if code := srv.stop(t, syscall.SIGINT); code != 0 {
		t.Fatalf("serve exited %d after SIGINT\nstderr:\n%s", code, srv.stderr)
	}
	counters := jsonLines(t, srv.stdout.String())
	if len(counters) != 1 || counters[0]["answered"] != json.Number("1") || counters[0]["failed"] != json.Number("1") || counters[0]["unanswerable"] != json.Number("0") {
		t.Errorf("counters %v", srv.stdout)
	}
}

func TestServeFailingCommandExitsTwoForAsk(t *testing.T) {
	conn, url := brokerConn(t)
	q := "acemq-cli-test.fail." + cli.Suffix()
	deleteAtEnd(t, conn, q, contract.DeadLetterQueue(q), contract.ParkedQueue(q))
	srv := startCLI(t, "serve", "--url", url, "--queue", q, "--declare", "--", "sh", "-c", "echo boom >&2; exit 1")
	waitConsumers(t, conn, q, 1, srv)
	r := runCLI(t, "", "ask", "--url", url, "--exchange", "", "--routing-key", q, "--timeout", "20s", "x").wantCode(t, 2)
	if !strings.Contains(r.stderr, "boom") {
		t.Errorf("stderr %q", r.stderr)
	}
	if code := srv.stop(t, syscall.SIGTERM); code != 0 {
		t.Fatalf("serve exited %d after SIGTERM", code)
	}
	if !strings.Contains(srv.stdout.String(), "answered 0, failed 1, unanswerable 0") {
		t.Errorf("counters %q", srv.stdout)
	}
}

func TestAskTimeoutAndUnroutable(t *testing.T) {
	conn, url := brokerConn(t)
	q := testQueue(t, conn, "nobody-answers")
	r := runCLI(t, "", "ask", "--url", url, "--exchange", "", "--routing-key", q, "--timeout", "300ms", "x").wantCode(t, 3)
	if !strings.Contains(r.stderr, "no reply within 300ms") {
		t.Errorf("stderr %q", r.stderr)
	}
	runCLI(t, "", "ask", "--url", url, "--exchange", "", "--routing-key", "acemq-cli-test.nothing."+cli.Suffix(), "x").wantCode(t, 4)
}

func TestServeUsage(t *testing.T) {
	runCLI(t, "", "serve", "--queue", "q").wantCode(t, 1)
	r := runCLI(t, "", "serve", "--url", "memory://x", "--queue", "q", "--", "no-such-command-acemq").wantCode(t, 1)
	if !strings.Contains(r.stderr, "no-such-command-acemq") {
		t.Errorf("stderr %q", r.stderr)
	}
}

func TestDemoOnRabbitMQ(t *testing.T) {
	conn, url := brokerConn(t)
	r := runCLI(t, "", "demo", "--url", url).wantCode(t, 0)
	checkDemoOutput(t, r.stdout)
	_, rest, ok := strings.Cut(r.stdout, "names end in ")
	if !ok || len(rest) < 8 {
		t.Fatalf("no suffix in the demo output:\n%s", r.stdout)
	}
	sfx := rest[:8]
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	for _, q := range []string{".orders.new", ".orders.new.dlq", ".orders.new.parked", ".orders.new.retry.1s", ".pricing", ".pricing.dlq", ".pricing.parked",
		".documents", ".documents.dlq", ".documents.parked", ".payments", ".payments.dlq", ".fulfil.validate", ".fulfil.reserve.dlq", ".fulfil.dispatch.parked"} {
		name := "acemq-demo-" + sfx + q
		if _, err := queues.Inspect(ctx, conn, name); !errors.Is(err, acemq.ErrNotFound) {
			t.Errorf("the demo left %s behind (%v)", name, err)
			_ = topology.New().Queue(name).Delete(ctx, conn)
		}
	}
	// The portable API has no passive check of an exchange.
	for _, ex := range []string{".orders", ".fulfil"} {
		if err := brokertest.Driver(conn).InspectExchange(ctx, "acemq-demo-"+sfx+ex); err == nil {
			t.Errorf("the demo left exchange acemq-demo-%s%s behind", sfx, ex)
		}
	}
}

func TestReplay(t *testing.T) {
	conn, url := brokerConn(t)
	q := testQueue(t, conn, "replay")
	dlq := contract.DeadLetterQueue(q)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	deleteAtEnd(t, conn, dlq)
	if err := topology.New().Queue(dlq, topology.WithQueueType(topology.QueueClassic)).Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	for i, typ := range []string{"order.placed", "order.cancelled", "order.placed", "order.placed"} {
		runCLI(t, "", "publish", "--url", url, "--exchange", "", "--routing-key", dlq, "--type", typ, fmt.Sprintf(`{"n":%d}`, i)).wantCode(t, 0)
	}

	r := runCLI(t, "", "replay", "--url", url, "--queue", dlq, "--type", "order.cancelled", "--json").wantCode(t, 0)
	res := jsonLines(t, r.stdout)
	if len(res) != 1 || res[0]["moved"] != json.Number("1") || res[0]["skipped"] != json.Number("3") || res[0]["reason"] != "drained" || res[0]["routingKey"] != q {
		t.Fatalf("filtered replay: %v", r.stdout)
	}
	r = runCLI(t, "", "replay", "--url", url, "--queue", dlq, "--limit", "1").wantCode(t, 0)
	if !strings.Contains(r.stdout, "moved 1, skipped 0") || !strings.Contains(r.stdout, "stopped: limit") {
		t.Errorf("limited replay: %q", r.stdout)
	}
	r = runCLI(t, "", "replay", "--url", url, "--queue", dlq, "--keep-attempts").wantCode(t, 0)
	if !strings.Contains(r.stdout, "moved 2, skipped 0") || !strings.Contains(r.stdout, "stopped: drained") {
		t.Errorf("replay: %q", r.stdout)
	}
	lines := jsonLines(t, runCLI(t, "", "consume", "--url", url, "--queue", q, "--json").wantCode(t, 0).stdout)
	if len(lines) != 4 {
		t.Fatalf("%d messages back on %s, want 4", len(lines), q)
	}
	if lines[0]["type"] != "order.cancelled" {
		t.Errorf("the filtered replay moved %v first", lines[0]["type"])
	}
	for _, m := range lines {
		h := m["headers"].(map[string]any)
		if h["acemq-replayed-from"] != dlq || h["acemq-replay-count"] != json.Number("1") {
			t.Errorf("replay stamps: %v", h)
		}
	}
	if n := queueDepth(t, conn, dlq); n != 0 {
		t.Errorf("%d left in %s", n, dlq)
	}

	// To an exchange and routing key.
	runCLI(t, "", "publish", "--url", url, "--exchange", "", "--routing-key", dlq, "x").wantCode(t, 0)
	other := testQueue(t, conn, "replay-to")
	r = runCLI(t, "", "replay", "--url", url, "--queue", dlq, "--to-exchange", "", "--to-routing-key", other).wantCode(t, 0)
	if !strings.Contains(r.stdout, "moved 1") {
		t.Errorf("replay --to: %q", r.stdout)
	}
	eventually(t, "the message on "+other, func() bool { return queueDepth(t, conn, other) == 1 })
}

func TestReplayUsage(t *testing.T) {
	runCLI(t, "", "replay", "--url", "memory://x", "--queue", "orders.new").wantCode(t, 1)
	runCLI(t, "", "replay", "--url", "memory://x", "--queue", "orders.new.dlq", "--to-exchange", "x").wantCode(t, 1)
	r := runCLI(t, "", "replay", "--url", "memory://x", "--queue", "orders.new.dlq").wantCode(t, 1)
	if !strings.Contains(r.stderr, "does not exist") {
		t.Errorf("stderr %q", r.stderr)
	}
}

func TestServeMetricsAddr(t *testing.T) {
	conn, url := brokerConn(t)
	q := "acemq-cli-test.metrics." + cli.Suffix()
	deleteAtEnd(t, conn, q, contract.DeadLetterQueue(q), contract.ParkedQueue(q))
	srv := startCLI(t, "serve", "--url", url, "--queue", q, "--declare", "--metrics-addr", "127.0.0.1:0", "--", "cat")
	waitConsumers(t, conn, q, 1, srv)
	var base string
	eventually(t, "the metrics address on stderr", func() bool {
		_, rest, ok := strings.Cut(srv.stderr.String(), "metrics on http://")
		if !ok {
			return false
		}
		addr, _, _ := strings.Cut(rest, "/")
		base = "http://" + addr
		return true
	})
	runCLI(t, "", "ask", "--url", url, "--exchange", "", "--routing-key", q, "--timeout", "20s", `{"ping":1}`).wantCode(t, 0)

	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	code, body := get("/acemq-metrics")
	if code != 200 || !strings.Contains(body, "acemq_consume_total") || !strings.Contains(body, q) {
		t.Errorf("/acemq-metrics %d:\n%s", code, body)
	}
	code, body = get("/acemq-health")
	if code != 200 || !strings.Contains(body, `"status":"up"`) {
		t.Errorf("/acemq-health %d: %s", code, body)
	}
	code, body = get("/acemq-info")
	if code != 200 || !strings.Contains(body, "acemq serve") {
		t.Errorf("/acemq-info %d: %s", code, body)
	}
	if c := srv.stop(t, syscall.SIGINT); c != 0 {
		t.Errorf("serve exited %d", c)
	}
}
