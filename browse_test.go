package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/topology"
)

// TestInspectAndBrowse: a queue's depth and consumers, and looking at its
// messages without taking them, on both brokers.
func TestInspectAndBrowse(t *testing.T) {
	for _, b := range []backend{memoryBackend, rabbitBackend} {
		t.Run(b.name, func(t *testing.T) {
			r := newRig(t, b)
			ctx := context.Background()
			other := testenv.Unique(t, "acemq-test-other")
			r.mu.Lock()
			r.cleanup = append(r.cleanup, other)
			r.mu.Unlock()
			if err := topology.New().Queue(other, topology.WithQueueType(topology.QueueClassic)).Apply(ctx, r.conn); err != nil {
				t.Fatal(err)
			}

			if _, err := queues.Inspect(ctx, r.conn, r.q+"-missing"); !errors.Is(err, acemq.ErrNotFound) {
				t.Fatalf("Inspect of a missing queue: %v, want ErrNotFound", err)
			}
			if _, err := queues.Browse(ctx, r.conn, r.q+"-missing"); !errors.Is(err, acemq.ErrNotFound) {
				t.Fatalf("Browse of a missing queue: %v, want ErrNotFound", err)
			}
			pub := acemq.NewPublisher[string](r.conn, "")
			var ids []string
			for i := range 4 {
				env, err := pub.Send(ctx, r.q, fmt.Sprintf("m-%d", i))
				if err != nil {
					t.Fatal(err)
				}
				ids = append(ids, env.ID())
			}
			testenv.Eventually(t, "4 ready messages", func() bool { info, _ := queues.Inspect(ctx, r.conn, r.q); return info.Messages == 4 })
			if info, err := queues.Inspect(ctx, r.conn, r.q); err != nil || info.Name != r.q || info.Consumers != 0 {
				t.Fatalf("Inspect = %+v, %v", info, err)
			}

			br, err := queues.Browse(ctx, r.conn, r.q)
			if err != nil {
				t.Fatal(err)
			}
			var got []queues.Message
			for {
				m, ok, err := br.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				got = append(got, m)
			}
			if len(got) != 4 {
				t.Fatalf("browsed %d messages, want 4", len(got))
			}
			for i, m := range got {
				if m.Envelope.ID() != ids[i] || string(m.Payload) != fmt.Sprintf(`"m-%d"`, i) || m.Queue != r.q || m.RoutingKey != r.q {
					t.Errorf("message %d: id %s payload %s queue %q", i, m.Envelope.ID(), m.Payload, m.Queue)
				}
			}
			// Held: invisible to consumers and to a second browser.
			if info, _ := queues.Inspect(ctx, r.conn, r.q); info.Messages != 0 {
				t.Errorf("%d messages ready while the browser holds all of them", info.Messages)
			}
			other2, err := queues.Browse(ctx, r.conn, r.q)
			if err != nil {
				t.Fatal(err)
			}
			if _, ok, err := other2.Next(ctx); ok || err != nil {
				t.Errorf("a second browser read a held message (%v)", err)
			}
			if err := other2.Take(got[0]); err == nil {
				t.Error("a browser took a message another one holds")
			}
			_ = other2.Close()

			// Take one, move one (to the other queue), put the rest back.
			if err := br.Take(got[0]); err != nil {
				t.Fatal(err)
			}
			if err := br.Take(got[0]); err == nil {
				t.Error("a message was taken twice")
			}
			moved, err := got[1].Envelope.Change(func(f *acemq.Fields) { f.Headers["moved"] = true })
			if err != nil {
				t.Fatal(err)
			}
			if err := br.Move(ctx, got[1], "", other, moved); err != nil {
				t.Fatal(err)
			}
			var ue *driver.ReturnError
			if err := br.Move(ctx, got[2], "", r.q+"-nowhere", got[2].Envelope); !errors.As(err, &ue) {
				t.Fatalf("Move to nowhere: %v, want a *driver.ReturnError", err)
			}
			if err := br.Close(); err != nil {
				t.Fatal(err)
			}
			if _, _, err := br.Next(ctx); err == nil {
				t.Error("Next after Close did not fail")
			}
			testenv.Eventually(t, "2 messages back on the queue", func() bool { info, _ := queues.Inspect(ctx, r.conn, r.q); return info.Messages == 2 })
			d := getOne(t, r.conn, other)
			if d.MessageID != ids[1] || string(d.Body) != `"m-1"` || d.Headers["moved"] != true || !d.Persistent {
				t.Errorf("the moved message: id %s body %s headers %v", d.MessageID, d.Body, d.Headers)
			}
			// What was put back comes back redelivered, in order.
			rest := getOne(t, r.conn, r.q)
			if rest.MessageID != ids[2] || !rest.Redelivered {
				t.Errorf("put back: %s redelivered %t, want %s redelivered", rest.MessageID, rest.Redelivered, ids[2])
			}
		})
	}
}

// TestInspectCountsConsumers: a consumer shows in Inspect.
func TestInspectCountsConsumers(t *testing.T) {
	for _, b := range []backend{memoryBackend, rabbitBackend} {
		t.Run(b.name, func(t *testing.T) {
			r := newRig(t, b)
			consume(r, func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() })
			testenv.Eventually(t, "one consumer", func() bool {
				info, err := queues.Inspect(context.Background(), r.conn, r.q)
				return err == nil && info.Consumers == 1
			})
		})
	}
}

// TestRawLendsTheDriver: Raw hands over the driver connection while the
// connection is open, and refuses once it is closed.
func TestRawLendsTheDriver(t *testing.T) {
	c := memoryBackend.open(t)
	called := false
	if err := c.Raw(func(d driver.Conn) error {
		called = d != nil
		return nil
	}); err != nil || !called {
		t.Fatalf("Raw: %v, called %t", err, called)
	}
	want := errors.New("from f")
	if err := c.Raw(func(driver.Conn) error { return want }); err != want {
		t.Fatalf("Raw does not return f's error: %v", err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if err := c.Raw(func(driver.Conn) error { t.Error("f ran on a closed connection"); return nil }); !errors.Is(err, acemq.ErrClosed) {
		t.Fatalf("Raw after Close: %v, want ErrClosed", err)
	}
}

// A Browser holds its messages on the broker, not their bodies in memory:
// reading 32 messages of 1 MiB and dropping them leaves the heap as it
// was while the browser still holds them; a Move of one still publishes
// its body.
func TestBrowserKeepsNoBodies(t *testing.T) {
	for _, b := range []backend{memoryBackend, rabbitBackend} {
		t.Run(b.name, func(t *testing.T) {
			const n, size = 32, 1 << 20
			r := newRig(t, b)
			ctx := context.Background()
			pub := acemq.NewPublisher[string](r.conn, "")
			for i := range n {
				if _, err := pub.Send(ctx, r.q, strings.Repeat(string(rune('a'+i%26)), size)); err != nil {
					t.Fatal(err)
				}
			}
			testenv.Eventually(t, "the messages ready", func() bool { info, _ := queues.Inspect(ctx, r.conn, r.q); return info.Messages == n })
			br, err := queues.Browse(ctx, r.conn, r.q)
			if err != nil {
				t.Fatal(err)
			}
			defer br.Close()
			before := heapInUse()
			var last queues.Message
			for {
				m, ok, err := br.Next(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if !ok {
					break
				}
				last = m
			}
			if grew := heapInUse() - before; grew > 8*size {
				t.Errorf("a browser holding %d messages of %d bytes (the caller keeping one) grew the heap by %d bytes", n, size, grew)
			}
			other := r.q + ".moved"
			r.mu.Lock()
			r.cleanup = append(r.cleanup, other)
			r.mu.Unlock()
			if err := topology.New().Queue(other, topology.WithQueueType(topology.QueueClassic)).Apply(ctx, r.conn); err != nil {
				t.Fatal(err)
			}
			if err := br.Move(ctx, last, "", other, last.Envelope); err != nil {
				t.Fatal(err)
			}
			br2, err := queues.Browse(ctx, r.conn, other)
			if err != nil {
				t.Fatal(err)
			}
			defer br2.Close()
			m, ok, err := br2.Next(ctx)
			if err != nil || !ok || string(m.Body) != string(last.Body) {
				t.Fatalf("the moved message: ok %v, %d bytes, %v; want the body moved", ok, len(m.Body), err)
			}
		})
	}
}

// heapInUse is the heap's live bytes after a collection.
func heapInUse() int64 {
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}
