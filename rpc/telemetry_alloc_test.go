package rpc

import (
	"context"
	"log/slog"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	otelmetric "go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// meterOnly is a connection's telemetry that records metrics through mp
// and no spans.
type meterOnly struct{ mp otelmetric.MeterProvider }

func (meterOnly) PublishStart(ctx context.Context, m driver.Message, _ engine.Identity) (context.Context, driver.Message, func(error, time.Duration)) {
	return ctx, m, func(error, time.Duration) {}
}
func (meterOnly) Tracing() bool                             { return false }
func (meterOnly) Observing() bool                           { return true }
func (meterOnly) Carries(context.Context) bool              { return false }
func (t meterOnly) MeterProvider() otelmetric.MeterProvider { return t.mp }
func (meterOnly) TracerProvider() trace.TracerProvider      { return tracenoop.NewTracerProvider() }

// Recording a call's metrics builds nothing per call: the options of each
// outcome are built once, with the telemetry.
func TestRequestMetricsAllocateNothing(t *testing.T) {
	mp := metric.NewMeterProvider(metric.WithReader(metric.NewManualReader()))
	defer func() { _ = mp.Shutdown(context.Background()) }()
	tel := newTelemetry(engine.NewConn(nil, meterOnly{mp}, slog.Default(), nil), "", "prices")
	for o := range outcomeCount {
		tel.end(noSpan, o, time.Millisecond, nil) // the series exist
	}
	if n := testing.AllocsPerRun(100, func() {
		tel.end(noSpan, answered, time.Millisecond, nil)
		tel.end(noSpan, timedOut, time.Millisecond, nil)
	}); n != 0 {
		t.Fatalf("recording a call's metrics allocates %v times", n)
	}
}
