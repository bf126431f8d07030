package acemq_test

import (
	"context"
	"sync/atomic"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// BenchmarkTelemetryCost measures one publish and its consumption (a
// confirmed publish on memory://, then the handler and the ack) with no
// providers configured (the global no-ops), with configured no-op
// providers, and with the OpenTelemetry SDK recording every metric and
// span into memory. docs/observability.md reports the ratios.
func BenchmarkTelemetryCost(b *testing.B) {
	b.Run("none", func(b *testing.B) { benchRoundTrip(b) })
	b.Run("noop", func(b *testing.B) {
		benchRoundTrip(b, acemq.WithMeterProvider(metricnoop.NewMeterProvider()), acemq.WithTracerProvider(tracenoop.NewTracerProvider()))
	})
	b.Run("sdk", func(b *testing.B) {
		// Metrics into a manual reader (collected once, at the end), every
		// span sampled and handed synchronously to an exporter that drops
		// it: the SDK's own cost, without an export backlog.
		reader := sdkmetric.NewManualReader()
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
		var exp countingExporter
		tp := sdktrace.NewTracerProvider(sdktrace.WithSyncer(&exp))
		defer mp.Shutdown(context.Background())
		defer tp.Shutdown(context.Background())
		benchRoundTrip(b, acemq.WithMeterProvider(mp), acemq.WithTracerProvider(tp))
		b.StopTimer()
		if n := exp.n.Load(); n < int64(2*b.N) {
			b.Fatalf("%d spans for %d round trips", n, b.N)
		}
	})
}

type countingExporter struct{ n atomic.Int64 }

func (e *countingExporter) ExportSpans(_ context.Context, spans []sdktrace.ReadOnlySpan) error {
	e.n.Add(int64(len(spans)))
	return nil
}

func (e *countingExporter) Shutdown(context.Context) error { return nil }

func benchRoundTrip(b *testing.B, opts ...acemq.ConnOption) {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, brokertest.MemoryURL(b), opts...)
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	const q = "bench"
	if _, err := brokertest.Driver(c).DeclareQueue(ctx, driver.Queue{Name: q}); err != nil {
		b.Fatal(err)
	}
	done := make(chan struct{}, 1)
	c.OnSettle(func(acemq.Settlement) { done <- struct{}{} })
	k, err := acemq.Consume(ctx, c, q, func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() })
	if err != nil {
		b.Fatal(err)
	}
	defer k.Close(ctx)
	p := acemq.NewPublisher[string](c, "")
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		if _, err := p.Send(ctx, q, "order o-1"); err != nil {
			b.Fatal(err)
		}
		<-done
	}
}
