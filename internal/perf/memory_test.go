package perf

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"regexp"
	"runtime"
	"runtime/pprof"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/topology"
)

// full reports whether the full-size memory tests were asked for
// (ACEMQ_PERF_FULL=1): 100,000 messages and a 2 s idle window. The default
// is small enough for go test -race ./... in CI.
func full() bool { return os.Getenv("ACEMQ_PERF_FULL") == "1" }

// brokers runs f on the in-process broker and on RabbitMQ (skipped when
// ACEMQ_TEST_AMQP_URL is unset, failed in CI).
func brokers(t *testing.T, f func(t *testing.T, url string, kind queueKind)) {
	t.Run("memory", func(t *testing.T) {
		url := "memory://perf-" + strings.ReplaceAll(t.Name(), "/", "-")
		t.Cleanup(func() { memory.Reset(url) })
		f(t, url, "")
	})
	t.Run("rabbitmq", func(t *testing.T) {
		f(t, brokerURL(t), classic)
	})
}

// newQueue declares a uniquely named queue on url: on RabbitMQ through
// declare (deleted at cleanup), on memory:// through a topology.
func newQueue(t *testing.T, url string, kind queueKind) string {
	t.Helper()
	if kind != "" {
		return declare(t, url, kind)
	}
	c := connect(t, url)
	name := unique("mem")
	if err := topology.New().Queue(name, topology.WithQueueType(topology.QueueClassic)).Apply(ctxFor(t, 10*time.Second), c); err != nil {
		t.Fatal(err)
	}
	return name
}

// roundTrip publishes n messages to q in SendAll batches and consumes them
// all with a fresh consumer, which it closes. keep, when not nil, sees
// every message (the leak check uses it to keep the bodies).
func roundTrip(t *testing.T, c *acemq.Conn, q string, n int, keep func(acemq.Message[Order])) {
	t.Helper()
	ctx := ctxFor(t, 5*time.Minute)
	p := acemq.NewPublisher[Order](c, "")
	batch := make([]acemq.Outgoing[Order], 0, window)
	for sent := 0; sent < n; {
		batch = batch[:0]
		for i := 0; i < window && sent+i < n; i++ {
			batch = append(batch, acemq.Outgoing[Order]{RoutingKey: q, Payload: NewOrderCached(), Envelope: newFullEnvelope()})
		}
		if _, err := p.SendAll(ctx, batch); err != nil {
			t.Fatalf("publishing: %v", err)
		}
		sent += len(batch)
	}
	var got atomic.Int64
	done := make(chan struct{})
	cons, err := acemq.Consume(ctx, c, q, func(_ context.Context, m acemq.Message[Order]) acemq.Ack {
		if keep != nil {
			keep(m)
		}
		if got.Add(1) == int64(n) {
			close(done)
		}
		return acemq.Accept()
	}, acemq.WithConcurrency(4), acemq.WithPrefetch(prefetch), acemq.WithDeclarations(false))
	if err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-ctx.Done():
		t.Fatalf("only %d of %d messages arrived", got.Load(), n)
	}
	if err := cons.Close(ctx); err != nil {
		t.Fatalf("closing the consumer: %v", err)
	}
}

// heapInUse is HeapAlloc after two collections (the second frees what
// finalizers and cleared pools let go in the first).
func heapInUse() uint64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc
}

// TestHeapReturnsAfterTraffic sends messages through publish and consume
// and checks that the heap comes back to where it was: nothing is kept per
// message. 100,000 messages with ACEMQ_PERF_FULL=1 (bound 5 MB, 50 bytes a
// message); 5,000 otherwise (bound 2 MB, which a leak of a body or an
// envelope per message still exceeds).
func TestHeapReturnsAfterTraffic(t *testing.T) {
	n, bound := 5_000, uint64(2<<20)
	if full() {
		n, bound = 100_000, 5<<20
	}
	brokers(t, func(t *testing.T, url string, kind queueKind) {
		q := newQueue(t, url, kind)
		c := connect(t, url)
		// Warm up: pools, buffers and maps that grow once are grown here.
		roundTrip(t, c, q, min(n, 2*window), nil)
		before := heapInUse()
		roundTrip(t, c, q, n, nil)
		after := heapInUse()
		growth := int64(after) - int64(before)
		t.Logf("%d messages: heap %d KiB before, %d KiB after (%+d bytes, %+.1f bytes a message)",
			n, before>>10, after>>10, growth, float64(growth)/float64(n))
		if growth > int64(bound) {
			t.Errorf("the heap grew by %d bytes over %d messages (bound %d): something is kept per message", growth, n, bound)
		}
	})
}

// TestHeapMeasureSeesALeak checks the instrument: a handler that keeps
// every body must show up as growth.
func TestHeapMeasureSeesALeak(t *testing.T) {
	const n = 2_000
	url := "memory://perf-leak"
	t.Cleanup(func() { memory.Reset(url) })
	q := newQueue(t, url, "")
	c := connect(t, url)
	roundTrip(t, c, q, window, nil)
	var kept [][]byte
	var mu sync.Mutex
	before := heapInUse()
	roundTrip(t, c, q, n, func(m acemq.Message[Order]) {
		mu.Lock()
		kept = append(kept, bytes.Clone(m.Body))
		mu.Unlock()
	})
	growth := int64(heapInUse()) - int64(before)
	runtime.KeepAlive(kept)
	if growth < n*BodySize {
		t.Errorf("keeping %d bodies of %d bytes grew the heap by only %d bytes: the measurement misses leaks", n, BodySize, growth)
	}
}

// goroutineState matches a goroutine header of a debug=2 goroutine dump:
// "goroutine 17 [chan receive, 2 minutes]:".
var goroutineState = regexp.MustCompile(`(?m)^goroutine (\d+) \[([^,\]]+)`)

// busyGoroutines returns the ids of goroutines running or runnable now,
// with their stacks, leaving out the caller.
func busyGoroutines() map[string]string {
	var buf bytes.Buffer
	_ = pprof.Lookup("goroutine").WriteTo(&buf, 2)
	busy := map[string]string{}
	for _, block := range strings.Split(buf.String(), "\n\n") {
		m := goroutineState.FindStringSubmatch(block)
		if m == nil {
			continue
		}
		if (m[2] == "running" || m[2] == "runnable") && !strings.Contains(block, "busyGoroutines") {
			busy[m[1]] = block
		}
	}
	return busy
}

// TestBusyGoroutineIsSeen checks the instrument: a spinning goroutine is
// running or runnable when sampled.
func TestBusyGoroutineIsSeen(t *testing.T) {
	stop := make(chan struct{})
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			select {
			case <-stop:
				return
			default:
				runtime.Gosched()
			}
		}
	})
	defer func() { close(stop); wg.Wait() }()
	for range 100 {
		for _, stack := range busyGoroutines() {
			if strings.Contains(stack, "TestBusyGoroutineIsSeen") {
				return
			}
		}
		time.Sleep(time.Millisecond)
	}
	t.Error("a goroutine spinning on runtime.Gosched was never seen running or runnable")
}

// TestIdleConnectionIsQuiet starts 10 consumers on one connection and
// leaves them idle: no goroutine may stay busy and the process must burn
// next to no CPU (under a tenth of the idle window; a spinning goroutine
// burns all of it).
func TestIdleConnectionIsQuiet(t *testing.T) {
	window := time.Second
	if full() {
		window = 2 * time.Second
	}
	brokers(t, func(t *testing.T, url string, kind queueKind) {
		c := connect(t, url)
		ctx := ctxFor(t, time.Minute)
		for i := range 10 {
			q := newQueue(t, url, kind)
			cons, err := acemq.Consume(ctx, c, q, func(context.Context, acemq.Message[Order]) acemq.Ack {
				return acemq.Accept()
			}, acemq.WithConcurrency(4), acemq.WithDeclarations(false), acemq.WithConsumerTag(fmt.Sprintf("idle-%d", i)))
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { _ = cons.Close(context.Background()) })
		}
		// Let start-up settle: the goroutine count stops changing.
		last := -1
		for deadline := time.Now().Add(5 * time.Second); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
			n := runtime.NumGoroutine()
			if n == last {
				break
			}
			last = n
		}
		t.Logf("%d goroutines with 10 idle consumers of 4 handlers each", runtime.NumGoroutine())

		// A goroutine busy in every one of several samples is spinning.
		const samples = 5
		seen := map[string]int{}
		var stacks map[string]string
		// The CPU is counted over the idle sleeps only: the goroutine dumps
		// that look for spinning goroutines cost tens of milliseconds each
		// under -race, and are the test's work, not the library's.
		var cpu time.Duration
		for range samples {
			cpu0 := cpuClock()
			time.Sleep(window / samples)
			cpu += cpuClock() - cpu0
			stacks = busyGoroutines()
			for id := range stacks {
				seen[id]++
			}
		}
		t.Logf("process CPU over %s idle: %s", window, cpu)
		for id, k := range seen {
			if k == samples {
				t.Errorf("goroutine %s was running or runnable in all %d samples over %s:\n%s", id, samples, window, stacks[id])
			}
		}
		if cpu > window/10 {
			t.Errorf("the idle process used %s of CPU in %s (bound %s): something is polling", cpu, window, window/10)
		}
	})
}
