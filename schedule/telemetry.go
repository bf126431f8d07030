package schedule

import (
	"context"
	"time"

	"github.com/acemq/acemq/internal/engine"
	acemqtel "github.com/acemq/acemq/internal/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
)

// recorder records the scheduler's metrics (internal/telemetry names them)
// through the connection's meter provider.
type recorder struct {
	scheduled     metric.Int64Counter
	hops          metric.Int64Counter
	delivered     metric.Int64Counter
	undeliverable metric.Int64Counter
	lateness      metric.Float64Histogram
}

func newRecorder(pl *engine.Conn) *recorder {
	m := pl.MeterProvider().Meter(acemqtel.Scope)
	// On error the API still returns a usable (no-op) instrument.
	r := &recorder{}
	r.scheduled, _ = m.Int64Counter(acemqtel.ScheduleScheduled, metric.WithDescription("Messages handed to the scheduler, by target exchange and routing key."))
	r.hops, _ = m.Int64Counter(acemqtel.ScheduleHops, metric.WithDescription("Publishes of scheduled messages onto a rung, by rung."))
	r.delivered, _ = m.Int64Counter(acemqtel.ScheduleDelivered, metric.WithDescription("Scheduled messages published to their target, by exchange and routing key."))
	r.undeliverable, _ = m.Int64Counter(acemqtel.ScheduleUndeliverable, metric.WithDescription("Due messages that could not be delivered, by reason: unroutable (held back and tried again) or malformed (dropped)."))
	r.lateness, _ = m.Float64Histogram(acemqtel.ScheduleLateness, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(acemqtel.DurationBuckets()...),
		metric.WithDescription("How long after its due time a scheduled message was delivered; an early delivery counts 0."))
	return r
}

func targetAttrs(j job) metric.MeasurementOption {
	return metric.WithAttributes(attribute.String("exchange", j.exchange), attribute.String("routing.key", j.routingKey))
}

func (r *recorder) scheduledOne(ctx context.Context, j job) { r.scheduled.Add(ctx, 1, targetAttrs(j)) }

func (r *recorder) hop(ctx context.Context, to rung) {
	r.hops.Add(ctx, 1, metric.WithAttributes(attribute.String("rung", to.name)))
}

func (r *recorder) deliveredOne(ctx context.Context, j job, now time.Time) {
	attrs := targetAttrs(j)
	r.delivered.Add(ctx, 1, attrs)
	r.lateness.Record(ctx, max(now.Sub(j.due), 0).Seconds(), attrs)
}

func (r *recorder) failed(ctx context.Context, reason string) {
	r.undeliverable.Add(ctx, 1, metric.WithAttributes(attribute.String("reason", reason)))
}
