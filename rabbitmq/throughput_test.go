package rabbitmq

import (
	"context"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
	amqp "github.com/rabbitmq/amqp091-go"
)

// The throughput comparison: confirmed 256-byte publishes from many
// goroutines, raw amqp091 (deferred confirms on one channel) against the
// driver. Run with ACEMQ_TEST_THROUGHPUT=1 (it is slow and load-sensitive).

const (
	tpSenders = 64
	tpBody    = 256
)

func tpDuration() time.Duration {
	if s := os.Getenv("ACEMQ_TEST_THROUGHPUT_SECONDS"); s != "" {
		if n, err := strconv.Atoi(s); err == nil {
			return time.Duration(n) * time.Second
		}
	}
	return 5 * time.Second
}

func rawRate(t testing.TB, url, queue string, d time.Duration) float64 {
	ac, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer ac.Close()
	ch, err := ac.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	body := make([]byte, tpBody)
	var n atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	for range tpSenders {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				dc, err := ch.PublishWithDeferredConfirm("", queue, true, false, amqp.Publishing{
					DeliveryMode: amqp.Persistent, MessageId: "id", ContentType: "application/octet-stream", Body: body,
				})
				if err != nil {
					t.Error(err)
					return
				}
				if !dc.Wait() {
					t.Error("nack")
					return
				}
				n.Add(1)
			}
		})
	}
	start := time.Now()
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

func driverRate(t testing.TB, c driver.Conn, queue string, d time.Duration) float64 {
	body := make([]byte, tpBody)
	var n atomic.Int64
	deadline := time.Now().Add(d)
	var wg sync.WaitGroup
	ctx := context.Background()
	for range tpSenders {
		wg.Go(func() {
			for time.Now().Before(deadline) {
				if err := c.Publish(ctx, driver.Message{
					RoutingKey: queue, Mandatory: true, MessageID: "id", ContentType: "application/octet-stream", Body: body,
				}); err != nil {
					t.Error(err)
					return
				}
				n.Add(1)
			}
		})
	}
	start := time.Now()
	wg.Wait()
	return float64(n.Load()) / time.Since(start).Seconds()
}

func TestThroughputAgainstRawClient(t *testing.T) {
	url := testenv.AMQPURL(t)
	if os.Getenv("ACEMQ_TEST_THROUGHPUT") != "1" {
		t.Skip("set ACEMQ_TEST_THROUGHPUT=1 to compare throughput with the raw client")
	}
	if s := os.Getenv("ACEMQ_TEST_PUBLISH_CHANNELS"); s != "" {
		n, _ := strconv.Atoi(s)
		old := publishChannels
		publishChannels = n
		t.Cleanup(func() { publishChannels = old })
	}
	c := openTest(t, nil)
	q := tempQueue(t, c, driver.Queue{Args: driver.Table{"x-max-length": int32(10000)}})
	// Alternate short windows so that load from elsewhere on the machine
	// hits both sides alike; compare total rates and client CPU per publish.
	total := tpDuration()
	const windows = 10
	w := total / windows
	var rawN, drvN, rawT, drvT, rawCPU, drvCPU float64
	for range windows {
		cpu0 := cpuTime()
		r := rawRate(t, url, q, w)
		cpu1 := cpuTime()
		d := driverRate(t, c, q, w)
		cpu2 := cpuTime()
		secs := w.Seconds()
		rawN += r * secs
		drvN += d * secs
		rawT += secs
		drvT += secs
		rawCPU += (cpu1 - cpu0).Seconds()
		drvCPU += (cpu2 - cpu1).Seconds()
	}
	raw, drv := rawN/rawT, drvN/drvT
	t.Logf("raw amqp091 %.0f/s (%.1f µs client CPU each), driver %.0f/s (%.1f µs each), ratio %.2f",
		raw, rawCPU/rawN*1e6, drv, drvCPU/drvN*1e6, drv/raw)
	if drv < 0.9*raw {
		t.Errorf("driver throughput %.0f/s is below 0.9 × the raw client's %.0f/s", drv, raw)
	}
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func BenchmarkPublishConfirmed(b *testing.B) {
	c := openTest(b, nil)
	q := tempQueue(b, c, driver.Queue{Args: driver.Table{"x-max-length": int32(10000)}})
	body := make([]byte, tpBody)
	b.SetParallelism(tpSenders / max(1, testingProcs()))
	b.ReportAllocs()
	b.ResetTimer()
	b.RunParallel(func(pb *testing.PB) {
		ctx := context.Background()
		for pb.Next() {
			if err := c.Publish(ctx, driver.Message{RoutingKey: q, Mandatory: true, MessageID: "id", Body: body}); err != nil {
				b.Error(err)
				return
			}
		}
	})
}

func testingProcs() int {
	n, _ := strconv.Atoi(os.Getenv("GOMAXPROCS"))
	if n <= 0 {
		n = 2
	}
	return n
}
