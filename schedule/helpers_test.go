package schedule

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/internal/testenv"
)

// ladderOption gives a Publisher or Serve a ladder of the test's own: the
// fast harness. Only tests can build one.
type ladderOption struct{ l ladder }

func (o ladderOption) applyPublisher(c *publisherConfig) { c.ladder = o.l }
func (o ladderOption) applyServe(c *serveConfig)         { c.ladder = o.l }

// fastLadder is the family's ladder under names of the test's own, every
// time to live divided by scale: rung prefix.1m waits 1m/scale. The hop
// rule is the same, so a delay of 61 s is 61s/scale on it.
func fastLadder(t *testing.T, c *acemq.Conn, scale time.Duration) ladder {
	t.Helper()
	prefix := testenv.Unique(t, "acemq-sched")
	l := ladder{exchange: prefix, due: prefix + ".due"}
	for _, r := range family.rungs {
		fr := rung{name: prefix + strings.TrimPrefix(r.name, Exchange), ttl: r.ttl / scale}
		l.rungs = append(l.rungs, fr)
		if r == family.hold {
			l.hold = fr
		}
	}
	cleanupLadder(t, c, l)
	return l
}

// cleanupLadder deletes a ladder's queues and exchange when the test ends.
func cleanupLadder(t *testing.T, c *acemq.Conn, l ladder) {
	names := []string{l.due}
	for _, r := range l.rungs {
		names = append(names, r.name)
	}
	brokertest.DeleteAtEnd(t, c, names...)
	t.Cleanup(func() { _ = brokertest.Driver(c).DeleteExchange(context.Background(), l.exchange) })
}

// connect opens a connection recording its metrics into the returned
// reader.
func connect(t *testing.T, url string) (*acemq.Conn, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return brokertest.Connect(t, url, acemq.WithMeterProvider(mp)), reader
}

// counters collects the scheduler's counters, keyed "metric{k=v,…}" with
// the attributes sorted.
func counters(t *testing.T, r *sdkmetric.ManualReader) map[string]int64 {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]int64{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != telemetry.Scope {
			continue
		}
		for _, m := range sm.Metrics {
			sum, ok := m.Data.(metricdata.Sum[int64])
			if !ok {
				continue
			}
			for _, dp := range sum.DataPoints {
				var kv []string
				for _, a := range dp.Attributes.ToSlice() {
					kv = append(kv, string(a.Key)+"="+a.Value.String())
				}
				out[m.Name+"{"+strings.Join(kv, ",")+"}"] += dp.Value
			}
		}
	}
	return out
}

func key(metric string, kv ...attribute.KeyValue) string {
	var parts []string
	set := attribute.NewSet(kv...)
	for _, a := range set.ToSlice() {
		parts = append(parts, string(a.Key)+"="+a.Value.String())
	}
	return metric + "{" + strings.Join(parts, ",") + "}"
}

// target declares a uniquely named classic queue and collects what is
// delivered to it.
type target struct {
	q    string
	mu   sync.Mutex
	got  []acemq.Message[order]
	when []time.Time
	ch   chan struct{}
}

type order struct {
	ID string `json:"id"`
}

func newTarget(t *testing.T, c *acemq.Conn) *target {
	t.Helper()
	tg := &target{q: brokertest.Queue(t, c, "acemq-sched-target"), ch: make(chan struct{}, 100)}
	cons, err := acemq.Consume(context.Background(), c, tg.q, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		tg.mu.Lock()
		tg.got = append(tg.got, m)
		tg.when = append(tg.when, time.Now())
		tg.mu.Unlock()
		tg.ch <- struct{}{}
		return acemq.Accept()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cons.Close(context.Background()) })
	return tg
}

// wait waits for n deliveries in all and returns them.
func (tg *target) wait(t *testing.T, n int) ([]acemq.Message[order], []time.Time) {
	t.Helper()
	deadline := time.After(testenv.Patience)
	for {
		tg.mu.Lock()
		if len(tg.got) >= n {
			got, when := append([]acemq.Message[order](nil), tg.got...), append([]time.Time(nil), tg.when...)
			tg.mu.Unlock()
			return got, when
		}
		tg.mu.Unlock()
		select {
		case <-tg.ch:
		case <-deadline:
			t.Fatalf("%d of %d scheduled messages delivered to %s within %v", len(tg.got), n, tg.q, testenv.Patience)
		}
	}
}

// serve starts a control consumer, closed when the test ends (or earlier
// by the returned stop).
func serve(t *testing.T, c *acemq.Conn, opts ...ServeOption) (stop func()) {
	t.Helper()
	cons, err := Serve(context.Background(), c, opts...)
	if err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop = func() {
		once.Do(func() {
			ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
			defer cancel()
			if err := cons.Close(ctx); err != nil {
				t.Errorf("closing the control consumer: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return stop
}

func orderID(i int) order { return order{ID: fmt.Sprintf("o-%d", i)} }
