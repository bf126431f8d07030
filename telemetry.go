package acemq

import (
	"context"
	"time"

	"github.com/acemq/acemq/driver"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// InstrumentationScope is the OpenTelemetry scope of the family's metrics
// and spans.
const InstrumentationScope = "org.acemq.amqp"

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
// global provider (otel.GetTracerProvider) is used.
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

// TracerProvider is the tracer provider the connection records through.
func (c *Conn) TracerProvider() trace.TracerProvider {
	if c.obs.cfg.tracers != nil {
		return c.obs.cfg.tracers
	}
	return otel.GetTracerProvider()
}

// observer records the family's metrics and spans for one connection.
type observer struct {
	cfg telemetryConfig
}

func newObserver(cfg telemetryConfig) *observer { return &observer{cfg: cfg} }

// connEvent records a connection state transition.
func (o *observer) connEvent(driver.Event) {}

// settled records one settlement (consume metrics).
func (o *observer) settled(Settlement) {}

// publishStart is called before every publish with the message about to go
// out (its headers may be amended, e.g. with trace context); the returned
// function is called with the result.
func (o *observer) publishStart(ctx context.Context, m *driver.Message, env Envelope) (context.Context, func(error, time.Duration)) {
	return ctx, func(error, time.Duration) {}
}

// processStart is called when a delivery is taken up, before decoding; the
// returned context is the handler's, and end is called with the
// settlement once the delivery is settled (possibly later, on another
// goroutine, for waits in the consumer).
func (o *observer) processStart(ctx context.Context, queue string, d *driver.Delivery, env Envelope) (context.Context, func(Settlement)) {
	return ctx, func(Settlement) {}
}
