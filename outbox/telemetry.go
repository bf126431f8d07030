package outbox

import (
	"context"
	"time"

	"github.com/acemq/acemq/internal/engine"
	acemqtel "github.com/acemq/acemq/internal/telemetry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/trace"
)

// The relay's telemetry (docs/wire.md §10): acemq.outbox.total per relay
// publish (outcome published or failed), acemq.outbox.lag per published
// record (time from being stored to being confirmed), and this library's
// acemq.outbox.retired per retired record; spans "outbox relay" per batch,
// parents of the batch's publish spans, with an outbox.publish_failed
// event per failed record and an outbox.retired event per retired one.
type relayTelemetry struct {
	plumb   *engine.Conn
	tracer  trace.Tracer
	total   metric.Int64Counter
	lag     metric.Float64Histogram
	retired metric.Int64Counter
}

const (
	outcomePublished = "published"
	outcomeFailed    = "failed"

	attrOutboxLag = "messaging.acemq.outbox_lag_ms"
	attrReason    = "messaging.acemq.reason"
	attrMessageID = "messaging.message.id"
	eventFailed   = "outbox.publish_failed"
	eventRetired  = "outbox.retired"
	attrAttempt   = "messaging.acemq.attempt"
	attrBatch     = "messaging.batch.message_count"
	spanName      = "outbox relay"
)

// noSpan stands for the span of a pass made without tracing.
var noSpan = trace.SpanFromContext(context.Background())

func newRelayTelemetry(p *engine.Conn) *relayTelemetry {
	t := &relayTelemetry{plumb: p, tracer: p.TracerProvider().Tracer(acemqtel.Scope)}
	meter := p.MeterProvider().Meter(acemqtel.Scope)
	var err error
	if t.total, err = meter.Int64Counter(acemqtel.OutboxTotal,
		metric.WithDescription("Relay publishes of outbox records, by outcome.")); err != nil {
		t.total = noop.Int64Counter{}
	}
	if t.lag, err = meter.Float64Histogram(acemqtel.OutboxLag, metric.WithUnit("s"),
		metric.WithExplicitBucketBoundaries(acemqtel.DurationBuckets()...),
		metric.WithDescription("Time from an outbox record being stored to its confirmed publish.")); err != nil {
		t.lag = noop.Float64Histogram{}
	}
	if t.retired, err = meter.Int64Counter(acemqtel.OutboxRetired,
		metric.WithDescription("Outbox records the relay retired after their last allowed attempt.")); err != nil {
		t.retired = noop.Int64Counter{}
	}
	return t
}

func destAttrs(rec Record) []attribute.KeyValue {
	return []attribute.KeyValue{attribute.String("exchange", rec.Exchange), attribute.String("routing.key", rec.RoutingKey)}
}

func (t *relayTelemetry) start(ctx context.Context, n int) (context.Context, trace.Span) {
	if !t.plumb.Tracing() {
		return ctx, noSpan
	}
	return t.tracer.Start(ctx, spanName, trace.WithSpanKind(trace.SpanKindInternal),
		trace.WithAttributes(attribute.String("messaging.system", "rabbitmq"), attribute.Int(attrBatch, n)))
}

func (t *relayTelemetry) published(_ context.Context, span trace.Span, rec Record, lag time.Duration) {
	ctx := context.Background()
	t.total.Add(ctx, 1, metric.WithAttributes(append(destAttrs(rec), attribute.String("outcome", outcomePublished))...))
	t.lag.Record(ctx, lag.Seconds(), metric.WithAttributes(destAttrs(rec)...))
	if span != noSpan {
		span.SetAttributes(attribute.Int64(attrOutboxLag, lag.Milliseconds()))
	}
}

func (t *relayTelemetry) failed(_ context.Context, span trace.Span, rec Record, attempt int, retire bool, err error) {
	ctx := context.Background()
	t.total.Add(ctx, 1, metric.WithAttributes(append(destAttrs(rec), attribute.String("outcome", outcomeFailed))...))
	if retire {
		t.retired.Add(ctx, 1, metric.WithAttributes(destAttrs(rec)...))
	}
	if span == noSpan {
		return
	}
	attrs := trace.WithAttributes(attribute.String(attrMessageID, rec.MessageID), attribute.Int(attrAttempt, attempt), attribute.String(attrReason, err.Error()))
	span.AddEvent(eventFailed, attrs)
	if retire {
		span.AddEvent(eventRetired, attrs)
	}
	span.SetStatus(codes.Error, err.Error())
}
