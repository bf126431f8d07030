// Package acemqtest helps test code built on acemq: a memory:// broker of
// the test's own, reset when the test ends; connections closed when it
// ends; topologies declared for a test and deleted after it; waiting until
// consumers have nothing left to do; the settlements a connection records,
// collected; a look at what a queue holds; and a clock the test moves, so
// that hours of retry rungs, TTLs and schedules pass in no real time
// (NewClock, on memory:// only).
//
// A test of a consumer reads as:
//
//	func TestShipping(t *testing.T) {
//		conn := acemqtest.Connect(t, acemqtest.URL(t))
//		acemqtest.Declare(t, conn, topology.New().Queue("orders.new", topology.WithDeadLettering(true)))
//		settled := acemqtest.Record(t, conn)
//		consumer, err := acemq.Consume(ctx, conn, "orders.new", ship)
//		…
//		// publish, then:
//		acemqtest.WaitIdle(t, conn, consumer)
//		if n := settled.Count(acemq.OutcomeAcked); n != 3 { … }
//	}
//
// Every helper works on RabbitMQ too (pass its URL to Connect); only URL
// and NewClock are about memory://. The helpers fail the test, with t.Fatalf, when
// something they need does not happen within Timeout; call them from the
// test's goroutine. docs/testing.md in the repository has more.
package acemqtest

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/topology"
)

// Timeout bounds every wait of the package: connecting, closing, and the
// waits of WaitIdle, Recorder.Wait and Peek. It is long enough for a
// loaded CI machine and a real broker; a test that passes never spends it.
const Timeout = 20 * time.Second

// quiet is how long WaitIdle watches an idle consumer stay idle before it
// believes it: a delivery can be on its way from the broker to a consumer
// that counts neither as ready on the queue nor as taken up.
const quiet = 50 * time.Millisecond

var brokers atomic.Int64

// URL returns the URL of a memory:// broker of the test's own (a new one
// at each call), named after the test and reset (emptied and forgotten)
// when the test ends, after every connection Connect opened is closed.
func URL(t testing.TB) string {
	url := fmt.Sprintf("memory://%s-%d", name(t), brokers.Add(1))
	t.Cleanup(func() { memory.Reset(url) })
	return url
}

// name is t.Name() with everything but ASCII letters and digits replaced
// by '-'.
func name(t testing.TB) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
}

// Connect opens a connection to url, named after the test unless opts
// name it, and closes it when the test ends (draining its consumers).
func Connect(t testing.TB, url string, opts ...acemq.ConnOption) *acemq.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	c, err := acemq.Connect(ctx, url, append([]acemq.ConnOption{acemq.WithName(t.Name())}, opts...)...)
	if err != nil {
		t.Fatalf("acemqtest: connecting to %s: %v", url, err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		if err := c.Close(ctx); err != nil {
			t.Errorf("acemqtest: closing the connection to %s: %v", url, err)
		}
	})
	return c
}

// Declare applies topo on conn's broker and deletes it (Topology.Delete)
// when the test ends, before conn is closed.
func Declare(t testing.TB, conn *acemq.Conn, topo *topology.Topology) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	if err := topo.Apply(ctx, conn); err != nil {
		t.Fatalf("acemqtest: declaring the topology: %v", err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), Timeout)
		defer cancel()
		if err := topo.Delete(ctx, conn); err != nil && !errors.Is(err, acemq.ErrClosed) {
			t.Errorf("acemqtest: deleting the topology: %v", err)
		}
	})
}

// WaitIdle waits until every consumer has nothing left to do: its queue
// holds no ready message, it holds no delivery it has taken up (no handler
// running, no retry waiting in the consumer), and no retry waits on one of
// its policy's broker rung queues — and has stayed so for a moment, since a
// delivery on its way from the broker shows in none of those. It fails the
// test when that does not happen within Timeout, saying what was left.
//
// It does not know of messages still to be published, nor of messages a
// handler publishes to other queues for other consumers: list those
// consumers too.
//
// On a broker under a test's Clock (NewClock), what waits for the clock
// counts as idle — a retry or in-progress delay waiting in the consumer,
// a message on a rung queue — since only advancing the clock moves it on:
// WaitIdle then means that nothing more happens until the clock moves.
func WaitIdle(t testing.TB, conn *acemq.Conn, consumers ...*acemq.Consumer) {
	t.Helper()
	deadline := time.Now().Add(Timeout)
	var idleSince time.Time
	for {
		busy := busyWith(conn, consumers)
		switch {
		case busy != "":
			idleSince = time.Time{}
		case idleSince.IsZero():
			idleSince = time.Now()
		case time.Since(idleSince) >= quiet:
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("acemqtest: the consumers were not idle within %v: %s", Timeout, busy)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// busyWith says what a consumer still has to do, or "".
//
// Under a test's Clock, what waits for the clock is idle: a retry waiting
// in the consumer or an in-progress delay not yet due, and messages on the
// policy's rung queues, since nothing happens to them until the clock is
// advanced.
func busyWith(conn *acemq.Conn, consumers []*acemq.Consumer) string {
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	clocked := underClock(conn)
	for _, c := range consumers {
		st := engine.ConsumerOf(c)
		if st == nil {
			return "a consumer is nil"
		}
		busy := st.Unsettled()
		if clocked {
			busy -= st.Waiting()
		}
		if busy > 0 {
			return fmt.Sprintf("the consumer of %q holds %d unsettled deliveries", st.Queue(), busy)
		}
		names := append([]string{st.Queue()}, st.Rungs()...)
		if clocked {
			names = names[:1]
		}
		for _, q := range names {
			info, err := queues.Inspect(ctx, conn, q)
			switch {
			case errors.Is(err, acemq.ErrNotFound):
			case err != nil:
				return fmt.Sprintf("inspecting %q: %v", q, err)
			case info.Messages > 0:
				return fmt.Sprintf("%q holds %d ready messages", q, info.Messages)
			}
		}
	}
	return ""
}

// Recorder collects the settlements of a connection's consumers.
type Recorder struct {
	mu   sync.Mutex
	all  []acemq.Settlement
	more chan struct{} // closed and replaced at every settlement
}

// Record starts collecting every settlement of conn's consumers, from now
// until the test ends.
func Record(t testing.TB, conn *acemq.Conn) *Recorder {
	r := &Recorder{more: make(chan struct{})}
	t.Cleanup(conn.OnSettle(func(s acemq.Settlement) {
		r.mu.Lock()
		r.all = append(r.all, s)
		close(r.more)
		r.more = make(chan struct{})
		r.mu.Unlock()
	}))
	return r
}

// All returns the settlements recorded so far, in the order they happened.
func (r *Recorder) All() []acemq.Settlement {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]acemq.Settlement(nil), r.all...)
}

// Count is the number of settlements recorded so far with outcome o; with
// no outcome, of all of them.
func (r *Recorder) Count(o ...acemq.Outcome) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	if len(o) == 0 {
		return len(r.all)
	}
	n := 0
	for _, s := range r.all {
		for _, want := range o {
			if s.Outcome == want {
				n++
				break
			}
		}
	}
	return n
}

// Wait waits until at least n settlements are recorded and returns the
// first n. It fails the test when they are not within Timeout.
func (r *Recorder) Wait(t testing.TB, n int) []acemq.Settlement {
	t.Helper()
	timer := time.NewTimer(Timeout)
	defer timer.Stop()
	for {
		r.mu.Lock()
		got, more := len(r.all), r.more
		if got >= n {
			out := append([]acemq.Settlement(nil), r.all[:n]...)
			r.mu.Unlock()
			return out
		}
		r.mu.Unlock()
		select {
		case <-more:
		case <-timer.C:
			t.Fatalf("acemqtest: %d settlements within %v, want %d", got, Timeout, n)
		}
	}
}

// Peek returns the messages ready on queue, oldest first, without taking
// them: it reads them all with a Browser and puts them back. The broker
// marks them redelivered, and RabbitMQ counts that against a quorum queue's
// delivery limit.
func Peek(t testing.TB, conn *acemq.Conn, queue string) []acemq.Message[[]byte] {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), Timeout)
	defer cancel()
	b, err := queues.Browse(ctx, conn, queue)
	if err != nil {
		t.Fatalf("acemqtest: %v", err)
	}
	var out []acemq.Message[[]byte]
	for {
		m, ok, err := b.Next(ctx)
		if err != nil {
			_ = b.Close()
			t.Fatalf("acemqtest: %v", err)
		}
		if !ok {
			break
		}
		out = append(out, m.Message)
	}
	if err := b.Close(); err != nil {
		t.Fatalf("acemqtest: %v", err)
	}
	return out
}
