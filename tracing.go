package acemq

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"time"

	tracenoop "go.opentelemetry.io/otel/trace/noop"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/wire"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// The family's spans (docs/wire.md §10.4) and the trace context the
// headers carry, recorded through the OpenTelemetry trace API.

// Publish outcomes (docs/wire.md §10.3), span attribute names (§10.4) and span
// event names.
const (
	publishOutcomeConfirmed    = "confirmed"
	publishOutcomePublished    = "published"
	publishOutcomeUnroutable   = "unroutable"
	publishOutcomeFailed       = "failed"
	publishOutcomeRefused      = "refused"
	outcomeRequeuedSpanOutcome = "requeued"

	messagingSystem      = "rabbitmq"
	attrSystem           = "messaging.system"
	attrDestination      = "messaging.destination.name"
	attrOperation        = "messaging.operation"
	attrMessageID        = "messaging.message.id"
	attrConversationID   = "messaging.message.conversation_id"
	attrRoutingKey       = "messaging.rabbitmq.destination.routing_key"
	attrMessageType      = "messaging.acemq.message_type"
	attrAttempt          = "messaging.acemq.attempt"
	attrOutcome          = "messaging.acemq.outcome"
	attrReason           = "messaging.acemq.reason"
	attrRetryDelayMillis = "messaging.acemq.retry_delay_ms"

	eventRetried      = "message.retried"
	eventDeadLettered = "message.dead_lettered"
	eventParked       = "message.parked"
	eventDuplicate    = "message.duplicate"
)

// propagator is the one the family speaks: W3C Trace Context in the
// unprefixed traceparent and tracestate headers (docs/wire.md §3.2, §10.4). It
// does not depend on otel.GetTextMapPropagator, whose default propagates
// nothing: the headers are part of the wire contract, not a program's
// choice.
var propagator = propagation.TraceContext{}

// tracing reports whether spans are recorded now: false for a configured
// no-op provider, and for the global provider until a program installs
// one. It costs an atomic load.
func (o *observer) tracing() bool {
	if o.tracingOff {
		return false
	}
	if o.globalDelegate != nil && otel.GetTracerProvider() == o.globalDelegate {
		return false
	}
	return true
}

func isNoopTracerProvider(tp trace.TracerProvider) bool {
	switch tp.(type) {
	case tracenoop.TracerProvider, *tracenoop.TracerProvider:
		return true
	}
	// trace.NewNoopTracerProvider (deprecated) returns an unexported type.
	return reflect.TypeOf(tp).String() == "trace.noopTracerProvider"
}

// isGlobalTracerDelegate reports whether tp is the placeholder
// otel.GetTracerProvider returns before otel.SetTracerProvider is called.
func isGlobalTracerDelegate(tp trace.TracerProvider) bool {
	return reflect.TypeOf(tp).String() == "*global.tracerProvider"
}

// tracerProvider is the provider the connection records spans through: the
// configured one, else the global one now.
func (o *observer) tracerProvider() trace.TracerProvider {
	if o.cfg.tracers != nil {
		return o.cfg.tracers
	}
	return otel.GetTracerProvider()
}

func noopPublishDone(error, time.Duration) {}

// observingPublishes reports whether publishes are recorded now: spans are
// on or a publish metric is enabled. When it is false and the context
// carries no trace (carriesTrace), publishStart has nothing to do.
func (o *observer) observingPublishes() bool { return o.tracing() || o.publishMetrics() }

// publishMetrics reports whether a publish metric is enabled.
func (o *observer) publishMetrics() bool {
	bg := context.Background()
	return o.publishTotal.Enabled(bg) || o.publishDuration.Enabled(bg)
}

// carriesTrace reports whether ctx carries a trace context, which a
// publish passes on in its headers even with tracing off.
func carriesTrace(ctx context.Context) bool {
	return trace.SpanContextFromContext(ctx).IsValid()
}

// publishStart is called before every publish with the message about to go
// out (its headers may be amended, e.g. with trace context); the returned
// function is called with the result.
func (o *observer) publishStart(ctx context.Context, m *driver.Message, id engine.Identity) (context.Context, func(error, time.Duration)) {
	metrics := o.publishMetrics()
	ex, rk := m.Exchange, m.RoutingKey
	confirmed := !o.noConfirms || m.AlwaysConfirm
	if !o.tracing() {
		// No spans: still pass on a trace context the caller carries (for
		// example from an instrumented HTTP server), so a connection with
		// tracing off does not break a trace that runs through it.
		if carriesTrace(ctx) {
			injectTrace(ctx, m)
		}
		if !metrics {
			return ctx, noopPublishDone
		}
		return ctx, func(err error, d time.Duration) {
			o.recordPublish(ex, rk, publishOutcome(err, confirmed), d)
		}
	}

	dest := m.Exchange
	if dest == "" {
		dest = m.RoutingKey
	}
	mid, typ, corr := publishIdentity(m, id)
	ctx, span := o.tracer.Start(ctx, dest+" publish",
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String(attrSystem, messagingSystem),
			attribute.String(attrDestination, dest),
			attribute.String(attrOperation, "publish"),
			attribute.String(attrMessageID, mid),
			attribute.String(attrConversationID, corr),
			attribute.String(attrRoutingKey, m.RoutingKey),
			attribute.String(attrMessageType, typ),
		))
	injectTrace(ctx, m)
	return ctx, func(err error, d time.Duration) {
		outcome := publishOutcome(err, confirmed)
		span.SetAttributes(attribute.String(attrOutcome, outcome))
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
		span.End()
		if metrics {
			o.recordPublish(ex, rk, outcome, d)
		}
	}
}

func (o *observer) recordPublish(exchange, routingKey, outcome string, d time.Duration) {
	ctx := context.Background()
	set := o.attrs.get(attrKey{kind: 'p', a: exchange, b: routingKey, c: outcome})
	if o.publishTotal.Enabled(ctx) {
		o.publishTotal.Add(ctx, 1, set)
	}
	if o.publishDuration.Enabled(ctx) {
		o.publishDuration.Record(ctx, d.Seconds(), set)
	}
}

// publishOutcome names a publish result (docs/wire.md §10.3).
func publishOutcome(err error, confirmed bool) string {
	var ue *driver.ReturnError
	switch {
	case err == nil && confirmed:
		return publishOutcomeConfirmed
	case err == nil:
		return publishOutcomePublished
	case errors.As(err, &ue):
		return publishOutcomeUnroutable
	case errors.Is(err, driver.ErrBlocked):
		return publishOutcomeRefused
	}
	return publishOutcomeFailed
}

// publishIdentity reads the message id, type and correlation for a publish
// span: from id when the caller had the envelope, else from the headers
// written for it. The type is read from the headers, where an empty type
// has been defaulted to the routing key.
func publishIdentity(m *driver.Message, id engine.Identity) (string, string, string) {
	typ, _ := m.Headers[wire.HeaderType].(string)
	if id != (engine.Identity{}) {
		if typ == "" {
			typ = id.Type
		}
		return id.ID, typ, id.CorrelationID
	}
	corr, _ := m.Headers[wire.HeaderCorrelation].(string)
	return m.MessageID, typ, corr
}

// connTelemetry is the observer as the engine records publishes through
// it.
type connTelemetry struct{ o *observer }

func (t connTelemetry) PublishStart(ctx context.Context, m driver.Message, id engine.Identity) (context.Context, driver.Message, func(error, time.Duration)) {
	ctx, done := t.o.publishStart(ctx, &m, id)
	return ctx, m, done
}
func (t connTelemetry) Observing() bool                      { return t.o.observingPublishes() }
func (t connTelemetry) Carries(ctx context.Context) bool     { return carriesTrace(ctx) }
func (t connTelemetry) Tracing() bool                        { return t.o.tracing() }
func (t connTelemetry) MeterProvider() metric.MeterProvider  { return t.o.meterProvider() }
func (t connTelemetry) TracerProvider() trace.TracerProvider { return t.o.tracerProvider() }

// processStart is called when a delivery is taken up, before decoding; the
// returned context is the handler's, and end is called with the
// settlement once the delivery is settled (possibly later, on another
// goroutine, for waits in the consumer). end is nil when no span is
// recorded.
func (o *observer) processStart(ctx context.Context, queue string, d *driver.Delivery, env Envelope) (context.Context, func(Settlement)) {
	if !o.tracing() {
		return ctx, nil
	}
	opts := []trace.SpanStartOption{
		trace.WithSpanKind(trace.SpanKindConsumer),
		trace.WithAttributes(
			attribute.String(attrSystem, messagingSystem),
			attribute.String(attrDestination, queue),
			attribute.String(attrOperation, "process"),
			attribute.String(attrMessageID, env.ID()),
			attribute.String(attrConversationID, env.CorrelationID()),
			attribute.String(attrMessageType, env.Type()),
			attribute.Int(attrAttempt, env.Attempt()),
		),
	}
	// The parent is the publisher's context from the headers, never
	// whatever span the consumer was started under.
	// A copy of the table's header, so that d itself does not escape
	// (the carrier is an interface): without tracing the delivery stays on
	// its worker's stack.
	headers := d.Headers
	if sc := trace.SpanContextFromContext(propagator.Extract(context.Background(), tableCarrier{t: &headers})); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := o.tracer.Start(ctx, queue+" process", opts...)
	return ctx, func(s Settlement) { endProcessSpan(span, s) }
}

// endProcessSpan writes the settlement onto a process span and ends it.
func endProcessSpan(span trace.Span, s Settlement) {
	outcome := string(s.Outcome)
	if s.Outcome == OutcomeRequeued {
		outcome = outcomeRequeuedSpanOutcome
	} else if outcome == "" {
		outcome = publishOutcomeFailed
	}
	attrs := []attribute.KeyValue{attribute.String(attrOutcome, outcome)}
	if s.Reason != "" {
		attrs = append(attrs, attribute.String(attrReason, s.Reason))
	}
	if s.Outcome == OutcomeRetried || s.Outcome == OutcomeInProgress {
		attrs = append(attrs, attribute.Int64(attrRetryDelayMillis, s.Delay.Milliseconds()))
	}
	span.SetAttributes(attrs...)
	switch s.Outcome {
	case OutcomeRetried:
		span.AddEvent(eventRetried, trace.WithAttributes(
			attribute.Int64(attrRetryDelayMillis, s.Delay.Milliseconds()),
			attribute.String(attrReason, s.Reason)))
	case OutcomeDeadLettered, OutcomeRejected:
		span.AddEvent(eventDeadLettered, trace.WithAttributes(attribute.String(attrReason, s.Reason)))
	case OutcomeParked:
		span.AddEvent(eventParked, trace.WithAttributes(attribute.String(attrReason, s.Reason)))
	case OutcomeDuplicate:
		span.AddEvent(eventDuplicate)
	}
	var pe *PanicError
	switch {
	case errors.As(s.Err, &pe):
		span.RecordError(s.Err)
		span.SetStatus(codes.Error, s.Err.Error())
	case s.SettleErr != nil:
		// The decision's broker actions failed (a republish refused, lost
		// or unroutable, an ack that failed).
		span.RecordError(s.SettleErr)
		span.SetStatus(codes.Error, s.SettleErr.Error())
	case s.Outcome == OutcomeDeadLettered:
		span.SetStatus(codes.Error, s.Reason)
	case outcome == publishOutcomeFailed:
		span.SetStatus(codes.Error, "the delivery ended without an outcome")
	}
	span.End()
}

// injectTrace writes ctx's trace context into m's headers. The size the
// publisher added up no longer holds: the driver measures the table. The
// carrier gets the address of a copy of the headers field, not of m's own,
// so that m, which the caller keeps on its stack, does not escape with it.
func injectTrace(ctx context.Context, m *driver.Message) {
	h := m.Headers
	propagator.Inject(ctx, tableCarrier{t: &h})
	m.Headers, m.HeaderSize = h, 0
}

// tableCarrier adapts a header table to the propagation API. The table is
// created on the first Set.
type tableCarrier struct{ t *driver.Table }

func (c tableCarrier) Get(key string) string {
	switch v := (*c.t)[key].(type) {
	case string:
		return v
	case []byte:
		return string(v)
	}
	return ""
}

func (c tableCarrier) Set(key, value string) {
	if *c.t == nil {
		*c.t = driver.Table{}
	}
	(*c.t)[key] = value
}

func (c tableCarrier) Keys() []string { return slices.Collect(maps.Keys(*c.t)) }
