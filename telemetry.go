package acemq

import (
	"context"
	"time"

	"github.com/acemq/acemq/driver"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// telemetryConfig holds the providers given to Connect.
type telemetryConfig struct {
	meters  metric.MeterProvider
	tracers trace.TracerProvider
}

// observer records the family's metrics and spans for one connection.
type observer struct{}

func newObserver(telemetryConfig) *observer { return &observer{} }

func (o *observer) connEvent(driver.Event) {}

func (o *observer) settled(Settlement) {}

// publishStart is called before every publish with the message about to go
// out (its headers may be amended, e.g. with trace context); the returned
// function is called with the result.
func (o *observer) publishStart(ctx context.Context, m *driver.Message, env Envelope) (context.Context, func(error, time.Duration)) {
	return ctx, func(error, time.Duration) {}
}
