package rpc

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

// Outcome is how a call ended, as acemq.request.total, acemq.request.duration
// and the request span name it (docs/wire.md §10.3).
type Outcome string

// The request outcomes.
const (
	// OutcomeAnswered: a reply came back, whatever it said (a failure reply
	// and a reply the codec cannot read included).
	OutcomeAnswered Outcome = "answered"
	// OutcomeTimedOut: the call ended without a reply (deadline, cancelled
	// context, or the requester closed under it).
	OutcomeTimedOut Outcome = "timed_out"
	// OutcomeFailed: the request itself was not published.
	OutcomeFailed Outcome = "failed"
)

// Span attribute names of the request span (docs/wire.md §10.4).
const (
	attrSystem         = "messaging.system"
	attrDestination    = "messaging.destination.name"
	attrOperation      = "messaging.operation"
	attrMessageID      = "messaging.message.id"
	attrConversationID = "messaging.message.conversation_id"
	attrMessageType    = "messaging.acemq.message_type"
	attrOutcome        = "messaging.acemq.outcome"
)

type telemetry struct {
	conn     *engine.Conn
	tracer   trace.Tracer
	total    metric.Int64Counter
	duration metric.Float64Histogram
	dest     string
	key      string
	// The options of each outcome's measurements (indexed by outcome),
	// built once: an attribute set costs allocations and a sort each time
	// it is built, and a variadic option list a conversion of each option
	// and a slice.
	add [outcomeCount][]metric.AddOption
	rec [outcomeCount][]metric.RecordOption
}

// outcome indexes the outcomes in the telemetry's prebuilt options.
type outcome uint8

const (
	answered outcome = iota
	timedOut
	failed
	outcomeCount
)

// outcomes names each outcome.
var outcomes = [outcomeCount]Outcome{answered: OutcomeAnswered, timedOut: OutcomeTimedOut, failed: OutcomeFailed}

// noSpan stands for the span of a call made without tracing.
var noSpan = trace.SpanFromContext(context.Background())

func newTelemetry(conn *engine.Conn, exchange, routingKey string) *telemetry {
	t := &telemetry{
		conn:   conn,
		tracer: conn.TracerProvider().Tracer(acemqtel.Scope),
		dest:   exchange,
		key:    routingKey,
	}
	for o, name := range outcomes {
		opt := metric.WithAttributeSet(attribute.NewSet(
			attribute.String("routing.key", routingKey),
			attribute.String("outcome", string(name)),
		))
		t.add[o] = []metric.AddOption{opt}
		t.rec[o] = []metric.RecordOption{opt}
	}
	if exchange == "" {
		t.dest = routingKey
	}
	meter := conn.MeterProvider().Meter(acemqtel.Scope)
	var err error
	t.total, err = meter.Int64Counter(acemqtel.RequestTotal,
		metric.WithDescription("Requests made by requesters, by how they ended."))
	if err != nil {
		t.total = noop.Int64Counter{}
	}
	t.duration, err = meter.Float64Histogram(acemqtel.RequestDuration,
		metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(acemqtel.DurationBuckets()...),
		metric.WithDescription("Round trip of a request, from before its publish to its reply or its deadline."))
	if err != nil {
		t.duration = noop.Float64Histogram{}
	}
	return t
}

// start opens the CLIENT span of one call. Without tracing (see
// the connection's Tracing) it returns ctx and a span that records nothing,
// without building one.
func (t *telemetry) start(ctx context.Context, id, msgType string) (context.Context, trace.Span) {
	if !t.conn.Tracing() {
		return ctx, noSpan
	}
	return t.tracer.Start(ctx, t.dest+" request",
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithAttributes(
			attribute.String(attrSystem, "rabbitmq"),
			attribute.String(attrDestination, t.dest),
			attribute.String(attrOperation, "request"),
			attribute.String(attrMessageID, id),
			attribute.String(attrConversationID, id),
			attribute.String(attrMessageType, msgType),
		))
}

// end records the call's metrics and ends its span.
func (t *telemetry) end(span trace.Span, o outcome, d time.Duration, err error) {
	// A detached context: the caller's may be cancelled already, and a
	// recording must not depend on it.
	ctx := context.Background()
	t.total.Add(ctx, 1, t.add[o]...)
	t.duration.Record(ctx, d.Seconds(), t.rec[o]...)
	if span == noSpan {
		return
	}
	span.SetAttributes(attribute.String(attrOutcome, string(outcomes[o])))
	if o != answered {
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		} else {
			span.SetStatus(codes.Error, string(outcomes[o]))
		}
	}
	span.End()
}
