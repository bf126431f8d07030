package stream_test

import (
	"context"
	"errors"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/stream"
)

// A reader is settled by the consume engine: the connection's consume
// interceptors and the reader's own see every message before it is
// decoded, and a message one refuses is copied to {stream}.dlq with the
// interceptors' reason, its handler never called.
func TestReaderRunsConsumeInterceptors(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		var connSaw, readerSaw atomic.Int64
		refuse := errors.New("tenant unknown")
		c := brokertest.Connect(t, url, acemq.WithConsumeInterceptors(func(ctx context.Context, d acemq.Message[[]byte]) (context.Context, error) {
			connSaw.Add(1)
			if strings.Contains(string(d.Body), `"n":1`) {
				return nil, refuse
			}
			return nil, nil
		}))
		q := declare(t, c)
		publish(t, c, q, 0, 3)
		var all seen
		read(t, c, q, accepting(&all), stream.WithOffset(stream.First()),
			stream.WithConsumeInterceptors(func(ctx context.Context, d acemq.Message[[]byte]) (context.Context, error) {
				if d.Queue != q {
					t.Errorf("the reader's interceptor saw a delivery from %q, want %q", d.Queue, q)
				}
				readerSaw.Add(1)
				return nil, nil
			}))
		testenv.Eventually(t, "two handled and one refused", func() bool {
			all.mu.Lock()
			defer all.mu.Unlock()
			return len(all.ns) == 2 && connSaw.Load() == 3
		})
		d := brokertest.Get(t, c, contract.DeadLetterQueue(q))
		if r, _ := d.Headers[wire.HeaderError].(string); r != "an interceptor refused it: "+wire.Describe(refuse) {
			t.Errorf("the refused copy's reason is %q", r)
		}
		if ns, _ := all.wait(t, 2); !slices.Equal(ns, []int{0, 2}) {
			t.Errorf("the handler saw %v, want [0 2]", ns)
		}
		if n := readerSaw.Load(); n != 2 {
			t.Errorf("the reader's interceptor saw %d deliveries, want 2 (those the connection's let through)", n)
		}
	})
}

// A reader's handler runs inside its middleware, whose Ack is the one
// settled.
func TestReaderRunsMiddleware(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := declare(t, c)
		publish(t, c, q, 0, 3)
		var wrapped atomic.Int64
		parkTwo := func(next acemq.Handler[event]) acemq.Handler[event] {
			return func(ctx context.Context, m acemq.Message[event]) acemq.Ack {
				wrapped.Add(1)
				ack := next(ctx, m)
				if m.Payload.N == 2 {
					return acemq.Park(errParkedByMiddleware)
				}
				return ack
			}
		}
		var all seen
		r := read(t, c, q, accepting(&all), stream.WithOffset(stream.First()), stream.WithMiddleware(parkTwo))
		all.wait(t, 3)
		d := brokertest.Get(t, c, contract.ParkedQueue(q))
		if reason, _ := d.Headers[wire.HeaderError].(string); reason != "the handler parked it: "+wire.Describe(errParkedByMiddleware) {
			t.Errorf("the parked copy's reason is %q", reason)
		}
		testenv.Eventually(t, "the position past the third", func() bool { n, ok := r.Position(); return ok && n >= 3 })
		if n := wrapped.Load(); n != 3 {
			t.Errorf("the middleware ran %d times, want 3", n)
		}
	})
}

var errParkedByMiddleware = errors.New("the middleware parked it")

// Middleware for another payload type refuses the start.
func TestReaderRefusesMiddlewareOfAnotherType(t *testing.T) {
	c := brokertest.Connect(t, brokertest.MemoryURL(t))
	q := declare(t, c)
	mw := func(next acemq.Handler[string]) acemq.Handler[string] { return next }
	if _, err := stream.Read(context.Background(), c, q, accepting(&seen{}), stream.WithMiddleware(mw)); err == nil {
		t.Error("a reader of events started with middleware for strings")
	}
}

// A failure that opens a reader's circuit breaker leaves its message
// unsettled (a stream cannot take it back) and pauses the reader; after the
// cool-down the reader reads again from its position, that message first,
// as the probe. Without the breaker the retry would have been parked.
func TestReaderBreaker(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := declare(t, c)
		publish(t, c, q, 0, 3)
		var mu sync.Mutex
		var outcomes []acemq.Outcome
		remove := c.OnSettle(func(s acemq.Settlement) {
			if s.Queue == q {
				mu.Lock()
				outcomes = append(outcomes, s.Outcome)
				mu.Unlock()
			}
		})
		defer remove()
		var failed atomic.Bool
		var all seen
		r := read(t, c, q, func(_ context.Context, m acemq.Message[event]) acemq.Ack {
			all.add(m)
			if m.Payload.N == 1 && failed.CompareAndSwap(false, true) {
				return acemq.Retry(errors.New("the downstream is down"))
			}
			return acemq.Accept()
		}, stream.WithOffset(stream.First()), stream.WithBreaker(acemq.Breaker{ConsecutiveFailures: 1, CoolDown: 20 * time.Millisecond}))
		testenv.Eventually(t, "the position past the third", func() bool { n, ok := r.Position(); return ok && n >= 3 })
		if ns, _ := all.wait(t, 4); !slices.Equal(ns[:4], []int{0, 1, 1, 2}) {
			t.Errorf("the handler saw %v, want [0 1 1 2]: the message that opened the breaker again, first, after the cool-down", ns)
		}
		mu.Lock()
		got := slices.Clone(outcomes)
		mu.Unlock()
		want := []acemq.Outcome{acemq.OutcomeAcked, acemq.OutcomeRequeued, acemq.OutcomeAcked, acemq.OutcomeAcked}
		if !slices.Equal(got, want) {
			t.Errorf("settlements %v, want %v", got, want)
		}
		if n := brokertest.Depth(t, c, contract.ParkedQueue(q)); n != 0 {
			t.Errorf("%d messages parked, want none: the breaker held the failure back", n)
		}
	})
}

// A consumer started from a reader's handler, with the handler's context,
// is an ordinary consumer, not a second stream reader.
func TestConsumeFromReaderHandler(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		s := declare(t, c)
		q := brokertest.Queue(t, c, "plain")
		publish(t, c, s, 0, 1)
		publish(t, c, q, 7, 8)
		started := make(chan error, 1)
		var got seen
		read(t, c, s, func(ctx context.Context, m acemq.Message[event]) acemq.Ack {
			k, err := acemq.Consume(ctx, c, q, accepting(&got))
			if err == nil {
				t.Cleanup(func() { _ = k.Close(context.Background()) })
			}
			started <- err
			return acemq.Accept()
		}, stream.WithOffset(stream.First()))
		if err := <-started; err != nil {
			t.Fatalf("a consumer started from a reader's handler: %v", err)
		}
		if ns, _ := got.wait(t, 1); ns[0] != 7 {
			t.Errorf("the consumer read %v, want [7]", ns)
		}
	})
}

// Conn.Close stops a connection's readers as it stops its consumers: the
// reader's Done closes, and Close on the reader afterwards is harmless.
func TestConnCloseStopsReaders(t *testing.T) {
	url := brokertest.MemoryURL(t)
	admin := brokertest.Connect(t, url)
	q := declare(t, admin)
	c, err := acemq.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	r, err := stream.Read(context.Background(), c, q, accepting(&seen{}))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Fatalf("closing the connection: %v", err)
	}
	<-r.Done()
	if err := r.Close(context.Background()); err != nil {
		t.Errorf("closing the reader after its connection: %v", err)
	}
}
