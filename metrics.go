package acemq

import (
	"context"
	"sync"

	metricnoop "go.opentelemetry.io/otel/metric/noop"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/telemetry"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// The family's metrics (docs/wire.md §10.1–10.3), recorded through the
// OpenTelemetry metric API for one connection by its observer; the spans
// are in tracing.go and the tag sets in attrs.go.

// telemetryConfig holds the providers given to Connect.
type telemetryConfig struct {
	meters  metric.MeterProvider
	tracers trace.TracerProvider
}

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
	breakerState    metric.Int64ObservableGauge
	breakerOpened   metric.Int64Counter

	noConfirms bool
	attrs      attrCache

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
	o.tracer = tp.Tracer(telemetry.Scope)

	mp := cfg.meters
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	o.meter = mp.Meter(telemetry.Scope)
	o.instruments()
	return o
}

// instruments creates the family's instruments. An instrument the provider
// refuses (it never should) is replaced by a no-op one, so recording never
// fails.
func (o *observer) instruments() {
	m := o.meter
	var n metricnoop.Meter
	dur := metric.WithExplicitBucketBoundaries(telemetry.DurationBuckets()...)
	var err error
	if o.publishTotal, err = m.Int64Counter(telemetry.PublishTotal, metric.WithUnit("{publish}"),
		metric.WithDescription("Publishes, by exchange, routing key and outcome (confirmed, published, unroutable, failed, refused).")); err != nil {
		o.publishTotal, _ = n.Int64Counter("")
	}
	if o.publishDuration, err = m.Float64Histogram(telemetry.PublishDuration, metric.WithUnit("s"), dur,
		metric.WithDescription("Time from publish to the broker's confirm (or failure).")); err != nil {
		o.publishDuration, _ = n.Float64Histogram("")
	}
	if o.consumeTotal, err = m.Int64Counter(telemetry.ConsumeTotal, metric.WithUnit("{delivery}"),
		metric.WithDescription("Settled deliveries, by queue and outcome (acked, retried, rejected, dead_lettered, parked, in_progress).")); err != nil {
		o.consumeTotal, _ = n.Int64Counter("")
	}
	if o.consumeDuration, err = m.Float64Histogram(telemetry.ConsumeDuration, metric.WithUnit("s"), dur,
		metric.WithDescription("Time spent decoding and in the handler, by queue and outcome.")); err != nil {
		o.consumeDuration, _ = n.Float64Histogram("")
	}
	if o.consumeAttempts, err = m.Int64Histogram(telemetry.ConsumeAttempts, metric.WithUnit("{attempt}"),
		metric.WithExplicitBucketBoundaries(telemetry.AttemptBuckets()...),
		metric.WithDescription("The attempt number of each settled delivery, by queue.")); err != nil {
		o.consumeAttempts, _ = n.Int64Histogram("")
	}
	if o.inFlight, err = m.Int64ObservableGauge(telemetry.ConsumeInFlight, metric.WithUnit("{delivery}"),
		metric.WithDescription("Deliveries being handled now, by queue.")); err != nil {
		o.inFlight, _ = n.Int64ObservableGauge("")
	}
	if o.retried, err = m.Int64Counter(telemetry.Retried, metric.WithUnit("{message}"),
		metric.WithDescription("Retries, by queue and where the wait is held (consumer, broker, requeued).")); err != nil {
		o.retried, _ = n.Int64Counter("")
	}
	if o.deadLettered, err = m.Int64Counter(telemetry.DeadLettered, metric.WithUnit("{message}"),
		metric.WithDescription("Messages set aside, by queue and outcome (dead_lettered for .dlq, parked for .parked).")); err != nil {
		o.deadLettered, _ = n.Int64Counter("")
	}
	if o.setAsideFailed, err = m.Int64Counter(telemetry.SetAsideFailed, metric.WithUnit("{message}"),
		metric.WithDescription("Set-asides whose target queue was missing; the message was put back on its queue.")); err != nil {
		o.setAsideFailed, _ = n.Int64Counter("")
	}
	if o.rungMissing, err = m.Int64Counter(telemetry.RungMissing, metric.WithUnit("{message}"),
		metric.WithDescription("Retries whose rung queue was missing; the wait moved to the consumer.")); err != nil {
		o.rungMissing, _ = n.Int64Counter("")
	}
	if o.connEvents, err = m.Int64Counter(telemetry.ConnectionEvents, metric.WithUnit("{event}"),
		metric.WithDescription("Connection state transitions, by event (lost, retrying, recovered, blocked, unblocked).")); err != nil {
		o.connEvents, _ = n.Int64Counter("")
	}
	if o.breakerState, err = m.Int64ObservableGauge(telemetry.BreakerState, metric.WithUnit("{state}"),
		metric.WithDescription("The state of a consumer's circuit breaker, by queue: 0 closed, 1 half open, 2 open. Consumers without a breaker report nothing.")); err != nil {
		o.breakerState, _ = n.Int64ObservableGauge("")
	}
	if o.breakerOpened, err = m.Int64Counter(telemetry.BreakerOpened, metric.WithUnit("{opening}"),
		metric.WithDescription("How often a consumer's circuit breaker opened, by queue.")); err != nil {
		o.breakerOpened, _ = n.Int64Counter("")
	}
}

// breakerOpen counts a circuit breaker's opening.
func (o *observer) breakerOpen(queue string) {
	ctx := context.Background()
	if o.breakerOpened.Enabled(ctx) {
		o.breakerOpened.Add(ctx, 1, o.attrs.get(attrKey{kind: 'q', a: queue}))
	}
}

// breakerGauge is the gauge value of a breaker state.
func breakerGauge(s BreakerState) int64 {
	switch s {
	case BreakerHalfOpen:
		return 1
	case BreakerOpen:
		return 2
	}
	return 0
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
		var breakers map[string]int64
		for k := range c.consumers {
			counts[k.queue] += int64(k.loop.InFlight())
			if k.loop.HasBreaker() {
				if breakers == nil {
					breakers = map[string]int64{}
				}
				breakers[k.queue] = max(breakers[k.queue], breakerGauge(BreakerState(k.loop.BreakerState())))
			}
		}
		c.mu.Unlock()
		for q, n := range counts {
			ob.ObserveInt64(o.inFlight, n, o.attrs.get(attrKey{kind: 'q', a: q}))
		}
		for q, n := range breakers {
			ob.ObserveInt64(o.breakerState, n, o.attrs.get(attrKey{kind: 'q', a: q}))
		}
		return nil
	}, o.inFlight, o.breakerState)
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

// meterProvider is the provider the connection records through: the
// configured one, else the global one now.
func (o *observer) meterProvider() metric.MeterProvider {
	if o.cfg.meters != nil {
		return o.cfg.meters
	}
	return otel.GetMeterProvider()
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
		o.retried.Add(ctx, 1, o.attrs.get(attrKey{kind: 'w', a: s.Queue, b: string(where)}))
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
	case OutcomeAcked, OutcomeRetried, OutcomeRejected, OutcomeDeadLettered, OutcomeParked, OutcomeInProgress, OutcomeDuplicate:
		return true
	}
	return false
}

// retriedWhere is the where tag of acemq.messages.retried.total for s, or
// "" when s is not a retry: a retry that went out (consumer or broker), or
// a retry whose republish failed and was put back (requeued).
func retriedWhere(s Settlement) Where {
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
