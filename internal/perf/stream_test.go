package perf

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/stream"
	amqp "github.com/rabbitmq/amqp091-go"
)

// streamKind is a stream's x-queue-type.
const streamKind queueKind = "stream"

// BenchmarkStreamRead compares reading a stream from its first message,
// b.N messages per run, at the reader's default prefetch (10) and at 100.
// Both sides read the same stream in the same run: it is filled through
// acemq (256-byte JSON bodies, full envelopes) before the first side runs
// and topped up, never replaced, when a later run asks for more, so every
// run reads the same first b.N messages.
//
// raw consumes on one amqp091 channel with Qos(prefetch) and
// x-stream-offset=first, decodes each body with encoding/json into an Order
// and acks it singly, as RabbitMQ requires of a stream. acemq runs
// stream.Read[Order] from stream.First() with WithPrefetch(prefetch) and
// WithDeclarations(false); its handler returns Accept, and the reader
// tracks offsets, reads the envelope and records a settlement per message.
func BenchmarkStreamRead(b *testing.B) {
	url := brokerURL(b)
	s := &sharedStream{name: declare(b, url, streamKind)}
	for _, pf := range []int{10, 100} {
		b.Run("prefetch"+strconv.Itoa(pf), func(b *testing.B) {
			compare(b,
				side{"raw", func(b *testing.B) { rawStreamRead(b, url, s, pf, 0) }},
				side{"acemq", func(b *testing.B) { acemqStreamRead(b, url, s, pf, 0) }})
		})
	}
	// prefetch10at5k: prefetch10 held to 5,000 messages a second on both
	// sides, for client CPU per message at the same pace.
	b.Run("prefetch10at5k", func(b *testing.B) {
		compare(b,
			side{"raw", func(b *testing.B) { rawStreamRead(b, url, s, 10, pacedRate) }},
			side{"acemq", func(b *testing.B) { acemqStreamRead(b, url, s, 10, pacedRate) }})
	})
}

// sharedStream is the one stream both sides read.
type sharedStream struct {
	name   string
	mu     sync.Mutex
	filled int
}

// atLeast tops the stream up to n messages (not timed).
func (s *sharedStream) atLeast(b *testing.B, url string, n int) {
	b.StopTimer()
	s.mu.Lock()
	defer s.mu.Unlock()
	if n > s.filled {
		fill(b, url, s.name, n-s.filled)
		s.filled = n
	}
}

// rawStreamRead reads b.N messages of s, held to rate a second (0: as fast
// as it goes).
func rawStreamRead(b *testing.B, url string, s *sharedStream, pf, rate int) {
	s.atLeast(b, url, b.N)
	ac := dialRaw(b, url)
	ch, err := ac.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := ch.Qos(pf, 0, false); err != nil {
		b.Fatal(err)
	}
	b.ReportAllocs()
	b.StartTimer()
	m := startMeter()
	dels, err := ch.Consume(s.name, "raw-stream", false, false, false, false, amqp.Table{"x-stream-offset": "first"})
	if err != nil {
		b.Fatal(err)
	}
	timeout := time.After(stallTimeout)
	pace := newPacer(rate)
	for i := 0; i < b.N; i++ {
		select {
		case d, ok := <-dels:
			if !ok {
				b.Fatalf("the deliveries stopped after %d of %d messages", i, b.N)
			}
			pace.wait(i + 1)
			var o Order
			if err := json.Unmarshal(d.Body, &o); err != nil {
				b.Error(err)
			}
			if err := d.Ack(false); err != nil {
				b.Fatal(err)
			}
		case <-timeout:
			b.Fatalf("only %d of %d messages arrived within %s", i, b.N, stallTimeout)
		}
	}
	m.Stop(b, b.N)
	_ = ch.Close()
}

// acemqStreamRead reads b.N messages of s, held to rate a second (0: as
// fast as it goes).
func acemqStreamRead(b *testing.B, url string, s *sharedStream, pf, rate int) {
	s.atLeast(b, url, b.N)
	c := connect(b, url)
	done := NewCountdown(b.N)
	b.ReportAllocs()
	b.StartTimer()
	m := startMeter()
	pace := &sharedPacer{pacer: newPacer(rate)}
	r, err := stream.Read(ctxFor(b, time.Minute), c, s.name, func(_ context.Context, msg acemq.Message[Order]) acemq.Ack {
		pace.next()
		done.Tick()
		return acemq.Accept()
	}, stream.WithOffset(stream.First()), stream.WithPrefetch(pf), stream.WithDeclarations(false))
	if err != nil {
		b.Fatal(err)
	}
	select {
	case <-done.Done():
	case <-time.After(stallTimeout):
		_ = r.Close(context.Background())
		b.Fatalf("only %d of %d messages arrived within %s", b.N-done.Left(), b.N, stallTimeout)
	}
	m.Stop(b, b.N)
	if err := r.Close(ctxFor(b, time.Minute)); err != nil {
		b.Error(err)
	}
}
