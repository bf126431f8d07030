package peers

import (
	"context"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/perf"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/topology"
)

// The scaling benchmarks: how cost grows with work, each beside raw
// amqp091-go doing the same where it can. cmd/perfplot draws their
// results (scripts/perf-scale runs both).
//
//   - ScaleConsumers/n=N: N idle consumers (concurrency 1, prefetch 200)
//     of one queue on one connection: the heap (after two collections)
//     and the goroutines each adds, and the time to start each. Sides:
//     acemq on RabbitMQ, acemq on memory://, raw (RawConsumer: a channel
//     and a goroutine each). Run it with -benchtime 1x: b.N is ignored.
//   - ScaleSenders/n=N: confirmed publishes from N goroutines (rawhdr:
//     RawPublisher.Send on one shared channel; acemq: Send), msgs/s and
//     client CPU per message.
//   - ScaleHandlers/n=N: consuming a filled quorum queue with N handlers
//     at prefetch 200 (raw: N goroutines on one channel; acemq:
//     WithConcurrency(N)).

// ScaleConsumerCounts, ScaleSenderCounts and ScaleHandlerCounts are the
// points of the curves.
var (
	scaleConsumerCounts = []int{1, 100, 1000}
	scaleSenderCounts   = []int{1, 4, 16, 64}
	scaleHandlerCounts  = []int{1, 8, 32}
)

func BenchmarkScaleConsumers(b *testing.B) {
	url := testenv.AMQPURL(b)
	for _, n := range scaleConsumerCounts {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			perf.Compare(b,
				perf.Side{Name: "raw", Run: func(b *testing.B) { rawConsumers(b, url, n) }},
				perf.Side{Name: "acemq", Run: func(b *testing.B) { acemqConsumers(b, url, n) }},
				perf.Side{Name: "acemq-memory", Run: func(b *testing.B) { acemqConsumers(b, "memory://peers-scale", n) }})
		})
	}
}

// footprint is the heap in use and the goroutines running, after two
// collections.
func footprint() (heap uint64, goroutines int) {
	var ms runtime.MemStats
	runtime.GC()
	runtime.GC()
	runtime.ReadMemStats(&ms)
	return ms.HeapAlloc, runtime.NumGoroutine()
}

// reportPerConsumer reports the heap and goroutines n consumers added
// since (heap0, g0), and how long each took to start.
func reportPerConsumer(b *testing.B, n int, heap0 uint64, g0 int, started time.Duration) {
	b.StopTimer()
	heap, g := footprint()
	b.ReportMetric(float64(int64(heap)-int64(heap0))/float64(n), "heap-B/consumer")
	b.ReportMetric(float64(g-g0)/float64(n), "goroutines/consumer")
	b.ReportMetric(float64(started.Microseconds())/float64(n), "start-µs/consumer")
}

func rawConsumers(b *testing.B, url string, n int) {
	q := perf.Declare(b, url, perf.Classic)
	conn := perf.OpenRaw(b, url)
	heap0, g0 := footprint()
	start := time.Now()
	cs := make([]*perf.RawConsumer, 0, n)
	for range n {
		c, err := perf.StartRawConsumer(conn, perf.RawConsumerConfig{Queue: q, Prefetch: perf.Prefetch, Handlers: 1})
		if err != nil {
			b.Fatalf("consumer %d of %d: %v", len(cs)+1, n, err)
		}
		cs = append(cs, c)
	}
	reportPerConsumer(b, n, heap0, g0, time.Since(start))
	for _, c := range cs {
		_ = c.Close()
	}
}

func acemqConsumers(b *testing.B, url string, n int) {
	var q string
	if url == "memory://peers-scale" {
		b.Cleanup(func() { memory.Reset(url) })
		q = perf.Unique("mem")
		c := perf.Connect(b, url)
		if err := topology.New().Queue(q, topology.WithQueueType(topology.QueueClassic)).Apply(perf.CtxFor(b, 10*time.Second), c); err != nil {
			b.Fatal(err)
		}
	} else {
		q = perf.Declare(b, url, perf.Classic)
	}
	conn := perf.Connect(b, url)
	ctx := perf.CtxFor(b, 10*time.Minute)
	heap0, g0 := footprint()
	start := time.Now()
	cs := make([]*acemq.Consumer, 0, n)
	for range n {
		c, err := acemq.Consume(ctx, conn, q, func(context.Context, acemq.Message[perf.Order]) acemq.Ack { return acemq.Accept() },
			acemq.WithPrefetch(perf.Prefetch), acemq.WithDeclarations(false))
		if err != nil {
			b.Fatalf("consumer %d of %d: %v", len(cs)+1, n, err)
		}
		cs = append(cs, c)
	}
	reportPerConsumer(b, n, heap0, g0, time.Since(start))
	for _, c := range cs {
		_ = c.Close(context.Background())
	}
}

func BenchmarkScaleSenders(b *testing.B) {
	url := testenv.AMQPURL(b)
	for _, n := range scaleSenderCounts {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			perf.Compare(b,
				perf.Side{Name: "rawhdr", Run: func(b *testing.B) { rawSend(b, url, n, true) }},
				perf.Side{Name: "acemq", Run: func(b *testing.B) { acemqSend(b, url, n) }})
		})
	}
}

func BenchmarkScaleHandlers(b *testing.B) {
	url := testenv.AMQPURL(b)
	for _, n := range scaleHandlerCounts {
		b.Run(fmt.Sprintf("n=%d", n), func(b *testing.B) {
			perf.Compare(b,
				perf.Side{Name: "raw", Run: func(b *testing.B) { rawConsume(b, url, n) }},
				perf.Side{Name: "acemq", Run: func(b *testing.B) { acemqConsume(b, url, n) }})
		})
	}
}
