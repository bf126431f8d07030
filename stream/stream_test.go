package stream_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/stream"
	"github.com/acemq/acemq/topology"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

type event struct {
	N int `json:"n"`
}

// declare declares a stream named after the test, deleted (with its .dlq
// and .parked) when the test ends.
func declare(t *testing.T, c *acemq.Conn, opts ...topology.Option) string {
	t.Helper()
	q := testenv.Unique(t, "stream")
	brokertest.DeleteAtEnd(t, c, q, contract.DeadLetterQueue(q), contract.ParkedQueue(q))
	opts = append([]topology.Option{topology.WithQueueType(topology.QueueStream)}, opts...)
	if err := topology.New().Queue(q, opts...).Apply(context.Background(), c); err != nil {
		t.Fatalf("declaring the stream %s: %v", q, err)
	}
	return q
}

func publish(t *testing.T, c *acemq.Conn, q string, from, to int) {
	t.Helper()
	p := acemq.NewPublisher[event](c, "")
	for i := from; i < to; i++ {
		if _, err := p.Send(context.Background(), q, event{N: i}); err != nil {
			t.Fatalf("publishing %d to %s: %v", i, q, err)
		}
	}
}

// seen is what a test reader's handler saw, in order.
type seen struct {
	mu   sync.Mutex
	ns   []int
	offs []int64
}

func (s *seen) add(m acemq.Message[event]) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.ns = append(s.ns, m.Payload.N)
	s.offs = append(s.offs, m.Offset)
}

func (s *seen) wait(t *testing.T, n int) ([]int, []int64) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%d messages", n), func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		return len(s.ns) >= n
	})
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.ns), slices.Clone(s.offs)
}

func read(t *testing.T, c *acemq.Conn, q string, h acemq.Handler[event], opts ...stream.Option) *stream.Reader {
	t.Helper()
	r, err := stream.Read(context.Background(), c, q, h, opts...)
	if err != nil {
		t.Fatalf("reading %s: %v", q, err)
	}
	t.Cleanup(func() { _ = r.Close(context.Background()) })
	return r
}

func accepting(s *seen) acemq.Handler[event] {
	return func(_ context.Context, m acemq.Message[event]) acemq.Ack {
		s.add(m)
		return acemq.Accept()
	}
}

func TestReadFromEveryStart(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := declare(t, c)
		publish(t, c, q, 0, 5)

		var all seen
		r := read(t, c, q, accepting(&all), stream.WithOffset(stream.First()))
		ns, offs := all.wait(t, 5)
		if !slices.Equal(ns, []int{0, 1, 2, 3, 4}) {
			t.Fatalf("from first: %v", ns)
		}
		for i := 1; i < len(offs); i++ {
			if offs[i] <= offs[i-1] || offs[0] < 0 {
				t.Fatalf("offsets %v: every message shows its offset, increasing", offs)
			}
		}
		testenv.Eventually(t, "the position to pass the last message", func() bool {
			next, ok := r.Position()
			return ok && next == offs[4]+1
		})

		var from2 seen
		read(t, c, q, accepting(&from2), stream.WithOffset(stream.At(offs[2])))
		if ns, _ := from2.wait(t, 3); !slices.Equal(ns, []int{2, 3, 4}) {
			t.Errorf("from offset %d: %v", offs[2], ns)
		}

		var last seen
		read(t, c, q, accepting(&last), stream.WithOffset(stream.Last()))
		if ns, _ := last.wait(t, 1); ns[0] != 4 {
			t.Errorf("from last: %v", ns)
		}

		var since seen
		read(t, c, q, accepting(&since), stream.WithOffset(stream.Since(time.Now().Add(-time.Minute))))
		if ns, _ := since.wait(t, 5); !slices.Equal(ns, []int{0, 1, 2, 3, 4}) {
			t.Errorf("since a minute ago: %v", ns)
		}

		// The default is next: only what comes after the reader starts.
		var next seen
		read(t, c, q, accepting(&next))
		publish(t, c, q, 5, 6)
		if ns, _ := next.wait(t, 1); ns[0] != 5 {
			t.Errorf("from next (the default): %v, want only 5", ns)
		}
	})
}

// Settlement on a stream (docs/wire.md §5.9): reject and park copy, retry
// and in-progress are refused and parked, the originals stay.
func TestSettlement(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := declare(t, c)
		publish(t, c, q, 0, 6)
		var mu sync.Mutex
		count := map[acemq.Outcome]int{}
		remove := c.OnSettle(func(s acemq.Settlement) {
			if s.Queue == q {
				mu.Lock()
				count[s.Outcome]++
				mu.Unlock()
			}
		})
		boom := errors.New("boom")
		var all seen
		read(t, c, q, func(_ context.Context, m acemq.Message[event]) acemq.Ack {
			all.add(m)
			switch m.Payload.N {
			case 1:
				return acemq.Reject(boom)
			case 2:
				return acemq.Park(boom)
			case 3:
				return acemq.Retry(boom)
			case 4:
				return acemq.InProgress(time.Second)
			case 5:
				panic("handler panic")
			}
			return acemq.Accept()
		}, stream.WithOffset(stream.First()))
		all.wait(t, 6)

		d := brokertest.Get(t, c, contract.DeadLetterQueue(q))
		if r, _ := d.Headers[wire.HeaderError].(string); !strings.HasPrefix(r, "the handler rejected it: ") {
			t.Errorf("the rejected copy's reason is %q", r)
		}
		d = brokertest.Get(t, c, contract.DeadLetterQueue(q))
		if r, _ := d.Headers[wire.HeaderError].(string); !strings.HasPrefix(r, "the handler reported an unprocessable message: ") {
			t.Errorf("the panicked copy's reason is %q", r)
		}
		wantParked := []string{"the handler parked it: ", "a stream cannot retry", "a stream cannot retry"}
		for _, want := range wantParked {
			d := brokertest.Get(t, c, contract.ParkedQueue(q))
			if r, _ := d.Headers[wire.HeaderError].(string); !strings.HasPrefix(r, want) {
				t.Errorf("a parked copy's reason is %q, want it to begin %q", r, want)
			}
		}
		testenv.Eventually(t, "six settlements", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return count[acemq.OutcomeAcked]+count[acemq.OutcomeRejected]+count[acemq.OutcomeParked] == 6
		})
		remove()
		if count[acemq.OutcomeRejected] != 2 || count[acemq.OutcomeParked] != 3 || count[acemq.OutcomeAcked] != 1 {
			t.Errorf("settlements reported %v, want 1 acked, 2 rejected, 3 parked", count)
		}
		// The originals stay in the stream.
		var again seen
		read(t, c, q, accepting(&again), stream.WithOffset(stream.First()))
		if ns, _ := again.wait(t, 6); !slices.Equal(ns, []int{0, 1, 2, 3, 4, 5}) {
			t.Errorf("the stream after settlement holds %v", ns)
		}
	})
}

func TestCheckpoints(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := declare(t, c)
		publish(t, c, q, 0, 3)
		store := &stream.Memory{}
		var first seen
		r := read(t, c, q, accepting(&first), stream.WithOffset(stream.First()), stream.WithCheckpoints(store, "t@"+q), stream.WithCheckpointEvery(1000))
		_, offs := first.wait(t, 3)
		testenv.Eventually(t, "the third settlement", func() bool { n, _ := r.Position(); return n == offs[2]+1 })
		if err := r.Close(context.Background()); err != nil {
			t.Fatal(err)
		}
		if off, ok, _ := store.Load(context.Background(), "t@"+q); !ok || off != offs[2] {
			t.Fatalf("the checkpoint after Close is %d (%v), want %d", off, ok, offs[2])
		}
		publish(t, c, q, 3, 5)
		var second seen
		read(t, c, q, accepting(&second), stream.WithOffset(stream.First()), stream.WithCheckpoints(store, "t@"+q))
		if ns, _ := second.wait(t, 2); !slices.Equal(ns, []int{3, 4}) {
			t.Errorf("a reader from its checkpoint read %v, want [3 4]", ns)
		}
	})
}

func TestOptionsRefused(t *testing.T) {
	c := brokertest.Connect(t, brokertest.MemoryURL(t))
	h := func(context.Context, acemq.Message[event]) acemq.Ack { return acemq.Accept() }
	for _, opt := range []stream.Option{stream.WithPrefetch(0), stream.WithCodec(nil), stream.WithCheckpoints(nil, "x"), stream.WithCheckpointEvery(0)} {
		if _, err := stream.Read(context.Background(), c, "s", h, opt); err == nil {
			t.Errorf("an option was accepted that should not be")
		}
	}
	// A stream consumer needs a stream: the memory broker says so for a
	// queue that is missing.
	if _, err := stream.Read(context.Background(), c, "missing", h); err == nil {
		t.Error("reading a missing stream succeeded")
	}
}

func TestParseOffset(t *testing.T) {
	at := time.Date(2026, 1, 2, 15, 4, 5, 0, time.UTC)
	for in, want := range map[string]stream.Offset{
		"first": stream.First(), "last": stream.Last(), "next": stream.Next(), "": stream.Next(),
		"42": stream.At(42), "0": stream.At(0), "2026-01-02T15:04:05Z": stream.Since(at),
	} {
		got, err := stream.ParseOffset(in)
		if err != nil || got.String() != want.String() {
			t.Errorf("ParseOffset(%q) = %v, %v; want %v", in, got, err, want)
		}
	}
	for _, bad := range []string{"-1", "firsts", "2026-01-02", "1.5"} {
		if _, err := stream.ParseOffset(bad); err == nil {
			t.Errorf("ParseOffset(%q) succeeded", bad)
		}
	}
}

func FuzzParseOffset(f *testing.F) {
	for _, s := range []string{"first", "last", "next", "17", "2026-01-02T15:04:05Z", "-3", ""} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := stream.ParseOffset(s)
		if err != nil {
			return
		}
		back, err := stream.ParseOffset(o.String())
		if err != nil || back.String() != o.String() {
			t.Fatalf("%q → %v does not read back (%v)", s, o, err)
		}
	})
}

// Read on a queue that is not a stream is refused when it subscribes: the
// broker refuses x-stream-offset on another queue type.
func TestNotAStream(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "plain")
		publish(t, c, q, 0, 3)
		_, err := stream.Read(context.Background(), c, q, func(context.Context, acemq.Message[event]) acemq.Ack { return acemq.Accept() })
		if err == nil || !strings.Contains(err.Error(), "x-stream-offset") {
			t.Errorf("reading a classic queue as a stream: %v", err)
		}
		if n := brokertest.Depth(t, c, q); n != 3 {
			t.Errorf("%d messages left on the queue, want 3", n)
		}
	})
}

// A stream declared with retention is accepted by the broker, declaring it
// again is harmless, and declaring it with another age is refused.
func TestDeclareWithRetention(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		opts := []topology.Option{topology.WithMaxAge(36 * time.Hour), topology.WithMaxLengthBytes(1 << 20), topology.WithMaxSegmentSizeBytes(1 << 16)}
		q := declare(t, c, opts...)
		again := topology.New().Queue(q, append([]topology.Option{topology.WithQueueType(topology.QueueStream)}, opts...)...)
		if err := again.Apply(context.Background(), c); err != nil {
			t.Errorf("declaring the same stream again: %v", err)
		}
		other := topology.New().Queue(q, topology.WithQueueType(topology.QueueStream), topology.WithMaxAge(7*24*time.Hour),
			topology.WithMaxLengthBytes(1<<20), topology.WithMaxSegmentSizeBytes(1<<16))
		err := other.Apply(context.Background(), c)
		t.Logf("another age: %v", err)
		if err == nil {
			t.Error("declaring the stream with another x-max-age was accepted")
		}
		// It reads as any stream.
		publish(t, c, q, 0, 2)
		var s seen
		read(t, c, q, accepting(&s), stream.WithOffset(stream.First()))
		s.wait(t, 2)
	})
}

// A body the reader's codec cannot decode is parked, the handler never
// sees it, and the reader goes on.
func TestUndecodableIsParked(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := declare(t, c)
		if _, err := acemq.NewPublisher[string](c, "", acemq.WithCodec(acemq.Text)).Send(context.Background(), q, "not json"); err != nil {
			t.Fatal(err)
		}
		publish(t, c, q, 1, 2)
		var s seen
		read(t, c, q, accepting(&s), stream.WithOffset(stream.First()))
		if ns, _ := s.wait(t, 1); ns[0] != 1 {
			t.Errorf("the handler saw %v", ns)
		}
		d := brokertest.Get(t, c, contract.ParkedQueue(q))
		r, _ := d.Headers[wire.HeaderError].(string)
		if !strings.HasPrefix(r, "could not be decoded: ") || !strings.Contains(r, "(content type text/plain") || string(d.Body) != "not json" {
			t.Errorf("the parked copy: reason %q, body %q", r, d.Body)
		}
	})
}
