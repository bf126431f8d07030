package acemq

import (
	"context"
	"errors"
	"maps"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/driver"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/metric"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// InstrumentationScope is the OpenTelemetry scope of the family's metrics
// and spans.
const InstrumentationScope = "org.acemq.amqp"

// The metric names the root package records (WIRE.md §10.1), plus
// MetricConnectionEvents, a Go addition. Packages built on acemq record
// their own families (acemq.request.*, acemq.pipeline.*) through
// Conn.MeterProvider.
const (
	MetricPublishTotal     = "acemq.publish.total"
	MetricPublishDuration  = "acemq.publish.duration"
	MetricConsumeTotal     = "acemq.consume.total"
	MetricConsumeDuration  = "acemq.consume.duration"
	MetricConsumeAttempts  = "acemq.consume.attempts"
	MetricConsumeInFlight  = "acemq.consume.in.flight"
	MetricRetried          = "acemq.messages.retried.total"
	MetricDeadLettered     = "acemq.messages.dead.lettered.total"
	MetricSetAsideFailed   = "acemq.messages.set.aside.failed"
	MetricRungMissing      = "acemq.retry.rung.missing"
	MetricConnectionEvents = "acemq.connection.events"
)

// Publish outcomes (WIRE.md §10.3), span attribute names (§10.4) and span
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
)

// DurationBuckets are the histogram bucket boundaries, in seconds, that the
// family's duration metrics advise: 5 ms to 60 s. Packages built on acemq
// use them for their own durations so that every family histogram shares
// one layout.
func DurationBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
}

// AttemptBuckets are the bucket boundaries advised for
// acemq.consume.attempts: 1 to 10.
func AttemptBuckets() []float64 { return []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10} }

// telemetryConfig holds the providers given to Connect.
type telemetryConfig struct {
	meters  metric.MeterProvider
	tracers trace.TracerProvider
}

// WithMeterProvider records the family's metrics through mp. Without it the
// global provider (otel.GetMeterProvider) is used, which records nothing
// until a program installs an SDK.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return func(c *connConfig) { c.tel.meters = mp }
}

// WithTracerProvider records the family's spans through tp. Without it the
// global provider (otel.GetTracerProvider) is used, which records nothing
// until a program installs an SDK with otel.SetTracerProvider.
func WithTracerProvider(tp trace.TracerProvider) Option {
	return func(c *connConfig) { c.tel.tracers = tp }
}

// MeterProvider is the meter provider the connection records through, for
// packages built on acemq (rpc, route) that record family metrics of their
// own.
func (c *Conn) MeterProvider() metric.MeterProvider {
	if c.obs.cfg.meters != nil {
		return c.obs.cfg.meters
	}
	return otel.GetMeterProvider()
}

// Tracing reports whether the connection records spans: false when it was
// given a no-op tracer provider, or when it uses the global one and no
// OpenTelemetry SDK has been installed there. Packages built on the
// connection (rpc) ask it before they build a span, so that a process
// without tracing pays nothing for spans. The answer can change
// when an SDK is installed globally later.
func (c *Conn) Tracing() bool { return c.obs.tracing() }

// TracerProvider is the tracer provider the connection records through.
func (c *Conn) TracerProvider() trace.TracerProvider {
	if c.obs.cfg.tracers != nil {
		return c.obs.cfg.tracers
	}
	return otel.GetTracerProvider()
}

// propagator is the one the family speaks: W3C Trace Context in the
// unprefixed traceparent and tracestate headers (WIRE.md §3.2, §10.4). It
// does not depend on otel.GetTextMapPropagator, whose default propagates
// nothing: the headers are part of the wire contract, not a program's
// choice.
var propagator = propagation.TraceContext{}

// observer records the family's metrics and spans for one connection.
//
// Its cost with no SDK installed is a few atomic loads per message: every
// instrument is asked Enabled before any attribute is built, and spans are
// only started when the tracer provider is not a no-op (see tracing).
type observer struct {
	cfg telemetryConfig

	tracer trace.Tracer
	// tracingOff is set for a configured no-op tracer provider.
	tracingOff bool
	// globalDelegate is the global tracer provider's placeholder, set when
	// the connection uses the global provider and no SDK was installed at
	// Connect: tracing stays off while otel.GetTracerProvider still
	// returns it, and turns on (through the delegating tracer) once a
	// program calls otel.SetTracerProvider.
	globalDelegate trace.TracerProvider

	meter           metric.Meter
	publishTotal    metric.Int64Counter
	publishDuration metric.Float64Histogram
	consumeTotal    metric.Int64Counter
	consumeDuration metric.Float64Histogram
	consumeAttempts metric.Int64Histogram
	inFlight        metric.Int64ObservableGauge
	retried         metric.Int64Counter
	deadLettered    metric.Int64Counter
	setAsideFailed  metric.Int64Counter
	rungMissing     metric.Int64Counter
	connEvents      metric.Int64Counter

	noConfirms bool
	attrs      attrCache
	// active maps a delivery being processed to its span context, so that
	// the republishes the engine makes for it (retry, set-aside,
	// in-progress) are children of its process span. Used only while
	// tracing is on.
	active sync.Map // *driver.Delivery → trace.SpanContext

	regMu sync.Mutex
	reg   metric.Registration
}

func newObserver(cfg telemetryConfig) *observer {
	o := &observer{cfg: cfg}

	tp := cfg.tracers
	if tp == nil {
		tp = otel.GetTracerProvider()
		if isGlobalTracerDelegate(tp) {
			o.globalDelegate = tp
		}
	} else if isNoopTracerProvider(tp) {
		o.tracingOff = true
	}
	o.tracer = tp.Tracer(InstrumentationScope)

	mp := cfg.meters
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	o.meter = mp.Meter(InstrumentationScope)
	o.instruments()
	return o
}

// instruments creates the family's instruments. An instrument the provider
// refuses (it never should) is replaced by a no-op one, so recording never
// fails.
func (o *observer) instruments() {
	m := o.meter
	var n metricnoop.Meter
	dur := metric.WithExplicitBucketBoundaries(DurationBuckets()...)
	var err error
	if o.publishTotal, err = m.Int64Counter(MetricPublishTotal, metric.WithUnit("{publish}"),
		metric.WithDescription("Publishes, by exchange, routing key and outcome (confirmed, published, unroutable, failed, refused).")); err != nil {
		o.publishTotal, _ = n.Int64Counter("")
	}
	if o.publishDuration, err = m.Float64Histogram(MetricPublishDuration, metric.WithUnit("s"), dur,
		metric.WithDescription("Time from publish to the broker's confirm (or failure).")); err != nil {
		o.publishDuration, _ = n.Float64Histogram("")
	}
	if o.consumeTotal, err = m.Int64Counter(MetricConsumeTotal, metric.WithUnit("{delivery}"),
		metric.WithDescription("Settled deliveries, by queue and outcome (acked, retried, rejected, dead_lettered, parked, in_progress).")); err != nil {
		o.consumeTotal, _ = n.Int64Counter("")
	}
	if o.consumeDuration, err = m.Float64Histogram(MetricConsumeDuration, metric.WithUnit("s"), dur,
		metric.WithDescription("Time spent decoding and in the handler, by queue and outcome.")); err != nil {
		o.consumeDuration, _ = n.Float64Histogram("")
	}
	if o.consumeAttempts, err = m.Int64Histogram(MetricConsumeAttempts, metric.WithUnit("{attempt}"),
		metric.WithExplicitBucketBoundaries(AttemptBuckets()...),
		metric.WithDescription("The attempt number of each settled delivery, by queue.")); err != nil {
		o.consumeAttempts, _ = n.Int64Histogram("")
	}
	if o.inFlight, err = m.Int64ObservableGauge(MetricConsumeInFlight, metric.WithUnit("{delivery}"),
		metric.WithDescription("Deliveries being handled now, by queue.")); err != nil {
		o.inFlight, _ = n.Int64ObservableGauge("")
	}
	if o.retried, err = m.Int64Counter(MetricRetried, metric.WithUnit("{message}"),
		metric.WithDescription("Retries, by queue and where the wait is held (consumer, broker, requeued).")); err != nil {
		o.retried, _ = n.Int64Counter("")
	}
	if o.deadLettered, err = m.Int64Counter(MetricDeadLettered, metric.WithUnit("{message}"),
		metric.WithDescription("Messages set aside, by queue and outcome (dead_lettered for .dlq, parked for .parked).")); err != nil {
		o.deadLettered, _ = n.Int64Counter("")
	}
	if o.setAsideFailed, err = m.Int64Counter(MetricSetAsideFailed, metric.WithUnit("{message}"),
		metric.WithDescription("Set-asides whose target queue was missing; the message was put back on its queue.")); err != nil {
		o.setAsideFailed, _ = n.Int64Counter("")
	}
	if o.rungMissing, err = m.Int64Counter(MetricRungMissing, metric.WithUnit("{message}"),
		metric.WithDescription("Retries whose rung queue was missing; the wait moved to the consumer.")); err != nil {
		o.rungMissing, _ = n.Int64Counter("")
	}
	if o.connEvents, err = m.Int64Counter(MetricConnectionEvents, metric.WithUnit("{event}"),
		metric.WithDescription("Connection state transitions, by event (lost, retrying, recovered, blocked, unblocked).")); err != nil {
		o.connEvents, _ = n.Int64Counter("")
	}
}

// watch starts the in-flight gauge over the connection's consumers and
// records whether application publishes are confirmed. It is called once
// the connection is open.
func (o *observer) watch(c *Conn, noConfirms bool) {
	o.noConfirms = noConfirms
	reg, err := o.meter.RegisterCallback(func(_ context.Context, ob metric.Observer) error {
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			return nil
		}
		counts := make(map[string]int64, len(c.consumers))
		for k := range c.consumers {
			counts[k.queue] += k.inflight.Load()
		}
		c.mu.Unlock()
		for q, n := range counts {
			ob.ObserveInt64(o.inFlight, n, o.attrs.get(attrKey{kind: 'q', a: q}))
		}
		return nil
	}, o.inFlight)
	if err == nil {
		o.regMu.Lock()
		o.reg = reg
		o.regMu.Unlock()
	}
}

// close stops the in-flight gauge.
func (o *observer) close() {
	o.regMu.Lock()
	reg := o.reg
	o.reg = nil
	o.regMu.Unlock()
	if reg != nil {
		_ = reg.Unregister()
	}
}

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

// connEvent records a connection state transition.
func (o *observer) connEvent(e driver.Event) {
	ctx := context.Background()
	if !o.connEvents.Enabled(ctx) {
		return
	}
	o.connEvents.Add(ctx, 1, o.attrs.get(attrKey{kind: 'e', a: string(e.Kind)}))
}

// settled records one settlement (consume metrics). Counts follow the
// engine's outcome; OutcomeRequeued is not a family outcome and is not
// counted in acemq.consume.total.
func (o *observer) settled(s Settlement) {
	ctx := context.Background()
	family := isFamilyOutcome(s.Outcome)
	if family && o.consumeTotal.Enabled(ctx) {
		o.consumeTotal.Add(ctx, 1, o.attrs.get(attrKey{kind: 'c', a: s.Queue, b: string(s.Outcome)}))
	}
	if family && o.consumeDuration.Enabled(ctx) {
		o.consumeDuration.Record(ctx, s.Duration.Seconds(), o.attrs.get(attrKey{kind: 'c', a: s.Queue, b: string(s.Outcome)}))
	}
	if o.consumeAttempts.Enabled(ctx) {
		o.consumeAttempts.Record(ctx, int64(s.Envelope.Attempt()), o.attrs.get(attrKey{kind: 'q', a: s.Queue}))
	}
	if where := retriedWhere(s); where != "" && o.retried.Enabled(ctx) {
		o.retried.Add(ctx, 1, o.attrs.get(attrKey{kind: 'w', a: s.Queue, b: where}))
	}
	if out := setAsideOutcome(s.Outcome); out != "" && o.deadLettered.Enabled(ctx) {
		o.deadLettered.Add(ctx, 1, o.attrs.get(attrKey{kind: 'd', a: s.Queue, b: out}))
	}
	if s.SetAsideFailed != "" && o.setAsideFailed.Enabled(ctx) {
		o.setAsideFailed.Add(ctx, 1, o.attrs.get(attrKey{kind: 't', a: s.Queue, b: s.SetAsideFailed}))
	}
	if s.RungMissing != "" && o.rungMissing.Enabled(ctx) {
		o.rungMissing.Add(ctx, 1, o.attrs.get(attrKey{kind: 'r', a: s.Queue, b: s.RungMissing}))
	}
}

func isFamilyOutcome(o Outcome) bool {
	switch o {
	case OutcomeAcked, OutcomeRetried, OutcomeRejected, OutcomeDeadLettered, OutcomeParked, OutcomeInProgress:
		return true
	}
	return false
}

// retriedWhere is the where tag of acemq.messages.retried.total for s, or
// "" when s is not a retry: a retry that went out (consumer or broker), or
// a retry whose republish failed and was put back (requeued).
func retriedWhere(s Settlement) string {
	switch {
	case s.Outcome == OutcomeRetried:
		if s.Where == "" {
			return WhereConsumer
		}
		return s.Where
	case s.Outcome == OutcomeRequeued && s.Decision == DecisionRetry && s.Where != "" && s.SetAsideFailed == "":
		return WhereRequeued
	}
	return ""
}

// setAsideOutcome is the outcome tag of acemq.messages.dead.lettered.total:
// dead_lettered for a copy set aside to {q}.dlq (rejected or dead-lettered
// by the engine), parked for {q}.parked.
func setAsideOutcome(o Outcome) string {
	switch o {
	case OutcomeRejected, OutcomeDeadLettered:
		return string(OutcomeDeadLettered)
	case OutcomeParked:
		return string(OutcomeParked)
	}
	return ""
}

func noopPublishDone(error, time.Duration) {}

// publishStart is called before every publish with the message about to go
// out (its headers may be amended, e.g. with trace context); the returned
// function is called with the result.
func (o *observer) publishStart(ctx context.Context, m *driver.Message, env Envelope) (context.Context, func(error, time.Duration)) {
	bg := context.Background()
	metrics := o.publishTotal.Enabled(bg) || o.publishDuration.Enabled(bg)
	ex, rk := m.Exchange, m.RoutingKey
	confirmed := !o.noConfirms || m.AlwaysConfirm
	if !o.tracing() {
		// No spans: still pass on a trace context the caller carries (for
		// example from an instrumented HTTP server), so a connection with
		// tracing off does not break a trace that runs through it.
		if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
			propagator.Inject(ctx, tableCarrier{t: &m.Headers})
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
	id, typ, corr := publishIdentity(m, env)
	ctx, span := o.tracer.Start(ctx, dest+" publish",
		trace.WithSpanKind(trace.SpanKindProducer),
		trace.WithAttributes(
			attribute.String(attrSystem, messagingSystem),
			attribute.String(attrDestination, dest),
			attribute.String(attrOperation, "publish"),
			attribute.String(attrMessageID, id),
			attribute.String(attrConversationID, corr),
			attribute.String(attrRoutingKey, m.RoutingKey),
			attribute.String(attrMessageType, typ),
		))
	propagator.Inject(ctx, tableCarrier{t: &m.Headers})
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

// publishOutcome names a publish result (WIRE.md §10.3).
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
// span: from env when it was built, else from the headers written for it.
// The type is read from the headers, where an empty type has been
// defaulted to the routing key.
func publishIdentity(m *driver.Message, env Envelope) (id, typ, corr string) {
	typ, _ = m.Headers[HeaderType].(string)
	if env.built() {
		if typ == "" {
			typ = env.Type()
		}
		return env.ID(), typ, env.CorrelationID()
	}
	corr, _ = m.Headers[HeaderCorrelation].(string)
	return m.MessageID, typ, corr
}

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
	if sc := trace.SpanContextFromContext(propagator.Extract(context.Background(), tableCarrier{t: &d.Headers})); sc.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, sc)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	ctx, span := o.tracer.Start(ctx, queue+" process", opts...)
	o.active.Store(d, span.SpanContext())
	return ctx, func(s Settlement) {
		o.active.Delete(d)
		endProcessSpan(span, s)
	}
}

// within returns ctx carrying the process span of d, for a republish the
// engine makes for d from a detached context.
func (o *observer) within(ctx context.Context, d *driver.Delivery) context.Context {
	if !o.tracing() {
		return ctx
	}
	if v, ok := o.active.Load(d); ok {
		return trace.ContextWithSpanContext(ctx, v.(trace.SpanContext))
	}
	return ctx
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

// attrKey identifies a cached attribute set: kind selects the tag names.
type attrKey struct {
	kind    byte
	a, b, c string
}

// attrCacheMax bounds the cached attribute sets; past it, sets are built
// per measurement (high-cardinality routing keys).
const attrCacheMax = 4096

// metricQueueName is the name a queue goes by in metric tags. A queue named
// for one process's lifetime — a generated reply queue (acemq-reply-<uuid>,
// and the Java and .NET siblings' acemq.reply.<uuid>), a server-named queue
// (amq.gen-…), or RabbitMQ's direct reply-to address — is tagged with its
// pattern instead, so that requesters and subscribers that come and go do
// not each add series for good to every responder's and their own metrics.
// Spans keep the real name.
func metricQueueName(q string) string {
	switch {
	case generatedName(q, "acemq-reply-"):
		return "acemq-reply-*"
	case generatedName(q, "acemq.reply."):
		return "acemq.reply.*"
	case strings.HasPrefix(q, "amq.gen-"):
		return "amq.gen-*"
	case strings.HasPrefix(q, "amq.rabbitmq.reply-to."):
		return "amq.rabbitmq.reply-to.*"
	}
	return q
}

// generatedName reports whether name is prefix followed by a UUID, with or
// without hyphens: a name a library generated, not one an application chose.
func generatedName(name, prefix string) bool {
	rest, ok := strings.CutPrefix(name, prefix)
	if !ok || (len(rest) != 32 && len(rest) != 36) {
		return false
	}
	for i := 0; i < len(rest); i++ {
		switch c := rest[i]; {
		case c >= '0' && c <= '9', c >= 'a' && c <= 'f', c >= 'A' && c <= 'F', c == '-':
		default:
			return false
		}
	}
	return true
}

// attrCache keeps the measurement option of each tag combination, so a
// measurement builds no attribute set after the first of its kind.
type attrCache struct {
	m sync.Map // attrKey → metric.MeasurementOption
	n atomic.Int64
}

func (c *attrCache) get(k attrKey) metric.MeasurementOption {
	switch k.kind {
	case 'e':
	case 'p':
		if k.a == "" { // the default exchange routes by queue name
			k.b = metricQueueName(k.b)
		}
	default:
		k.a = metricQueueName(k.a)
	}
	if v, ok := c.m.Load(k); ok {
		return v.(metric.MeasurementOption)
	}
	opt := metric.WithAttributeSet(k.set())
	if c.n.Load() < attrCacheMax {
		if _, loaded := c.m.LoadOrStore(k, opt); !loaded {
			c.n.Add(1)
		}
	}
	return opt
}

func (k attrKey) set() attribute.Set {
	switch k.kind {
	case 'p':
		return attribute.NewSet(attribute.String("exchange", k.a), attribute.String("routing.key", k.b), attribute.String("outcome", k.c))
	case 'c':
		return attribute.NewSet(attribute.String("queue", k.a), attribute.String("outcome", k.b))
	case 'q':
		return attribute.NewSet(attribute.String("queue", k.a))
	case 'w':
		return attribute.NewSet(attribute.String("queue", k.a), attribute.String("where", k.b))
	case 'd':
		return attribute.NewSet(attribute.String("queue", k.a), attribute.String("outcome", k.b))
	case 't':
		return attribute.NewSet(attribute.String("queue", k.a), attribute.String("target", k.b))
	case 'r':
		return attribute.NewSet(attribute.String("queue", k.a), attribute.String("rung", k.b))
	case 'e':
		return attribute.NewSet(attribute.String("event", k.a))
	}
	panic("acemq: unknown attribute kind " + strconv.Itoa(int(k.kind)))
}
