package perf

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
)

// BenchmarkConsume compares consuming with manual acks from a quorum queue
// at prefetch 200, with 1 and with 8 handlers, b.N messages per run. The
// queue is filled first (not timed) through acemq, so both sides read the
// same bytes: a 256-byte JSON body with a full envelope.
//
// raw consumes on one amqp091 channel with Qos 200; c1 handles the
// deliveries in one goroutine, c8 in eight reading the same delivery
// channel; every delivery is decoded with encoding/json into an Order and
// acked singly. acemq runs Consume[Order] with Concurrency(1 or 8),
// Prefetch(200) and NoDeclare (nothing to declare: the per-message path is
// the same); its handler returns Accept.
func BenchmarkConsume(b *testing.B) {
	url := brokerURL(b)
	for _, conc := range []int{1, 8} {
		name := "c1"
		if conc == 8 {
			name = "c8"
		}
		b.Run(name, func(b *testing.B) {
			compare(b,
				side{"raw", func(b *testing.B) { rawConsume(b, url, conc) }},
				side{"acemq", func(b *testing.B) { acemqConsume(b, url, conc) }})
		})
	}
}

// stallTimeout bounds a consume run that stopped making progress.
const stallTimeout = 5 * time.Minute

func filledQueue(b *testing.B, url string) string {
	b.StopTimer()
	q := declare(b, url, quorum)
	fill(b, url, q, b.N)
	return q
}

func rawConsume(b *testing.B, url string, conc int) {
	q := filledQueue(b, url)
	ch, err := dialRaw(b, url).Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := ch.Qos(prefetch, 0, false); err != nil {
		b.Fatal(err)
	}
	var left atomic.Int64
	left.Store(int64(b.N))
	done := make(chan struct{})
	b.ReportAllocs()
	b.StartTimer()
	m := startMeter()
	dels, err := ch.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	var wg sync.WaitGroup
	for range conc {
		wg.Go(func() {
			for d := range dels {
				var o Order
				if err := json.Unmarshal(d.Body, &o); err != nil {
					b.Error(err)
				}
				if err := d.Ack(false); err != nil {
					b.Error(err)
				}
				if left.Add(-1) == 0 {
					close(done)
				}
			}
		})
	}
	stopped := make(chan struct{})
	go func() { wg.Wait(); close(stopped) }()
	select {
	case <-done:
	case <-stopped:
		b.Fatalf("the deliveries stopped after %d of %d messages (was the connection closed?)", int64(b.N)-left.Load(), b.N)
	case <-time.After(stallTimeout):
		b.Fatalf("only %d of %d messages arrived within %s", int64(b.N)-left.Load(), b.N, stallTimeout)
	}
	m.stop(b, b.N)
	_ = ch.Close()
	<-stopped
}

func acemqConsume(b *testing.B, url string, conc int) {
	q := filledQueue(b, url)
	c := connect(b, url)
	var left atomic.Int64
	left.Store(int64(b.N))
	done := make(chan struct{})
	b.ReportAllocs()
	b.StartTimer()
	m := startMeter()
	cons, err := acemq.Consume(ctxFor(b, time.Minute), c, q, func(_ context.Context, msg acemq.Message[Order]) acemq.Ack {
		if left.Add(-1) == 0 {
			close(done)
		}
		return acemq.Accept()
	}, acemq.Concurrency(conc), acemq.Prefetch(prefetch), acemq.NoDeclare())
	if err != nil {
		b.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(stallTimeout):
		_ = cons.Close(context.Background())
		b.Fatalf("only %d of %d messages arrived within %s", int64(b.N)-left.Load(), b.N, stallTimeout)
	}
	m.stop(b, b.N)
	if err := cons.Close(ctxFor(b, time.Minute)); err != nil {
		b.Error(err)
	}
}
