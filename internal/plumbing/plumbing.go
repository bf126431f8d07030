// Package plumbing carries what package acemq shares with the packages
// built on it (rpc, route, replay, actuator) but keeps out of its public
// API: the connection's one publish path for messages the library makes
// for itself, and the telemetry providers it records through.
//
// Package acemq fills it in when it is initialised; nothing here is for
// applications, and nothing here reaches the driver.
package plumbing

import (
	"context"
	"log/slog"

	"github.com/acemq/acemq/driver"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Message is a fully formed message for Conn.Publish: its headers already
// hold the envelope (acemq.Envelope.AppendHeaders) and MessageID its id.
type Message = driver.Message

// Conn is what package acemq lends about one of its connections.
type Conn struct {
	// Publish sends m through the connection's one publish path, with its
	// telemetry, and waits for the confirm unless confirms are off (and m
	// does not set AlwaysConfirm).
	Publish func(ctx context.Context, m Message) error
	// PublishBatch sends every message in order, then awaits every
	// confirm, through the same path and telemetry as Publish, and returns
	// one error per message (nil for confirmed). The outbox relay uses it
	// to keep a destination's records in the order they were recorded.
	PublishBatch func(ctx context.Context, ms []Message) []error
	// MeterProvider and TracerProvider are the providers the connection
	// records through: the configured ones, else the global ones now.
	MeterProvider  func() metric.MeterProvider
	TracerProvider func() trace.TracerProvider
	// Tracing reports whether spans are recorded now (see acemq's docs on
	// telemetry): packages built on the connection ask it before they
	// build a span.
	Tracing func() bool
	// Capabilities is what the broker supports.
	Capabilities func() driver.Capabilities
	// Settled reports a settlement (an acemq.Settlement) made by a package
	// that settles deliveries itself (stream) to the connection's metrics
	// and OnSettle listeners, as the consume engine's are.
	Settled func(settlement any)
	// Logger is the connection's logger (acemq.WithLogger), never nil: one
	// that discards everything when none was given. Packages built on the
	// connection log operator-level events through it (an outbox record
	// retired, say), never one line per message, and never a secret.
	Logger *slog.Logger
}

var connOf func(any) *Conn

// SetConnOf is called once, by package acemq's initialisation, with the
// function ConnOf calls.
func SetConnOf(f func(any) *Conn) { connOf = f }

// ConnOf returns the plumbing of an *acemq.Conn (nil for anything else).
func ConnOf(conn any) *Conn {
	if connOf == nil {
		return nil
	}
	return connOf(conn)
}

// ConsumerState is what package acemq reports about one of its consumers,
// for package acemqtest's WaitIdle: the queue it reads, how many
// deliveries it has taken up and not yet settled (handlers running and
// retries waiting in the consumer), how many of those wait on a timer of
// the connection's clock (in-consumer retry waits and in-progress delays
// not yet due), and the rung queues of its policy.
type ConsumerState struct {
	Queue     string
	Unsettled int64
	Waiting   int64
	Rungs     []string
}

var consumerState func(any) (ConsumerState, bool)

// SetConsumerState is called once, by package acemq's initialisation.
func SetConsumerState(f func(any) (ConsumerState, bool)) { consumerState = f }

// ConsumerStateOf reports the state of an *acemq.Consumer (false for
// anything else).
func ConsumerStateOf(c any) (ConsumerState, bool) {
	if consumerState == nil {
		return ConsumerState{}, false
	}
	return consumerState(c)
}

// Carrier is implemented by option values that carry a T: the codec option
// of package acemq carries its acemq.Codec, so that a package taking
// acemq.ConsumeOption values (rpc.Serve, route.Step) can write in the
// format its consumer reads.
type Carrier[T any] interface{ Carried() T }

// Carried returns the T carried by the last of opts that carries one, else
// def.
func Carried[T any, O any](opts []O, def T) T {
	for _, o := range opts {
		if c, ok := any(o).(Carrier[T]); ok {
			def = c.Carried()
		}
	}
	return def
}

var undecodableReason func(error) string

// SetUndecodableReason is called once, by package acemq's initialisation,
// with the function UndecodableReason calls.
func SetUndecodableReason(f func(error) string) { undecodableReason = f }

// UndecodableReason is the x-acemq-error the consume engine writes on a
// body it parks as undecodable (its prefix, the codec's error and the
// content type), for packages that settle deliveries themselves (stream),
// so that both write the same reason from one place.
func UndecodableReason(err error) string { return undecodableReason(err) }
