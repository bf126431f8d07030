package engine

import (
	"context"
	"log/slog"
	"reflect"
	"sync"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/declare"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Telemetry is what a connection records its publishes through: package
// acemq's observer, which holds the family's instruments and spans.
type Telemetry interface {
	// PublishStart is called before every publish with the message about
	// to go out; it returns the message to send (its headers may be
	// amended with trace context) and the function called with the result.
	// The message goes by value: one passed by pointer through an interface
	// would be moved to the heap for every publish.
	//
	// The connection calls it only when Observing or Carries(ctx) holds:
	// otherwise a publish has nothing to record and nothing to pass on.
	PublishStart(ctx context.Context, m driver.Message, id Identity) (context.Context, driver.Message, func(error, time.Duration))
	// Observing reports whether publishes are recorded now: spans are on
	// or a publish metric is enabled.
	Observing() bool
	// Carries reports whether ctx carries a trace context that a publish
	// passes on in its headers.
	Carries(ctx context.Context) bool
	// Tracing reports whether spans are recorded now.
	Tracing() bool
	// MeterProvider and TracerProvider are the providers the connection
	// records through: the configured ones, else the global ones now.
	MeterProvider() metric.MeterProvider
	TracerProvider() trace.TracerProvider
}

// Identity is the message id, type and correlation id a publish span
// names. The zero Identity says the caller has no envelope at hand: the
// span reads them from the message's headers.
type Identity struct {
	ID, Type, CorrelationID string
}

// Conn is the engine of one connection: its driver connection, the
// telemetry its publishes are recorded through, and its logger.
type Conn struct {
	t   driver.Conn
	tel Telemetry
	log *slog.Logger

	declared declare.Retries // the policies of the topologies applied on it
	closes   closings        // its consumers' subscription closes in progress

	// envelopes makes an EnvelopeWriter of package acemq's envelope,
	// returned as an any (see NewEnvelopeWriter).
	envelopes func() any
}

// NewConn returns the engine of a connection over t. log must not be nil.
// envelopes, package acemq's, makes a new EnvelopeWriter[acemq.Envelope]
// each time it is called (NewEnvelopeWriter); it may be nil, and then
// there are none.
func NewConn(t driver.Conn, tel Telemetry, log *slog.Logger, envelopes func() any) *Conn {
	return &Conn{t: t, tel: tel, log: log, envelopes: envelopes}
}

// Handle lets a type that embeds it (an *acemq.Conn) be found by Of. Its
// one method is unexported, so embedding it adds nothing to the embedding
// type's API.
type Handle struct{ c *Conn }

// NewHandle returns the Handle of c.
func NewHandle(c *Conn) Handle { return Handle{c} }

func (h Handle) engineConn() *Conn { return h.c }

// Of returns the engine of conn, an *acemq.Conn (nil for anything else,
// and for a nil or unopened connection).
func Of(conn any) *Conn {
	h, ok := conn.(interface{ engineConn() *Conn })
	if !ok || isNil(conn) {
		return nil
	}
	return h.engineConn()
}

// Publish sends m, a fully formed message (its headers already hold the
// envelope, MessageID its id), through the connection's one publish path,
// with its telemetry, and waits for the confirm unless confirms are off
// (and m does not set AlwaysConfirm).
func (c *Conn) Publish(ctx context.Context, m driver.Message) error {
	return c.PublishAs(ctx, m, Identity{})
}

// PublishAs is Publish with the identity the span names, for a caller that
// has the message's envelope.
func (c *Conn) PublishAs(ctx context.Context, m driver.Message, id Identity) error {
	if !c.hooked(ctx) {
		return c.t.Publish(ctx, m)
	}
	return c.publishHooked(ctx, m, id)
}

// publishHooked publishes m through the telemetry.
func (c *Conn) publishHooked(ctx context.Context, m driver.Message, id Identity) error {
	start := time.Now()
	ctx, m, done := c.tel.PublishStart(ctx, m, id)
	err := c.t.Publish(ctx, m)
	done(err, time.Since(start))
	return err
}

// PublishIdentified is PublishAs with the identity computed by id, which is
// called only when the publish goes through the telemetry: a caller whose
// identity costs something to read pays for it only when a span may name
// it.
func (c *Conn) PublishIdentified(ctx context.Context, m driver.Message, id func() Identity) error {
	if !c.hooked(ctx) {
		return c.t.Publish(ctx, m)
	}
	return c.publishHooked(ctx, m, id())
}

// PublishBatch sends every message in order, then awaits every confirm,
// through the same path and telemetry as Publish, and returns one error
// per message (nil for confirmed).
func (c *Conn) PublishBatch(ctx context.Context, ms []driver.Message) []error {
	return c.PublishBatchAs(ctx, ms, nil)
}

// PublishBatchAs is PublishBatch with idOf, when not nil, giving message
// j's identity for its span. A driver without driver.BatchPublisher
// publishes the messages at once, one goroutine each.
func (c *Conn) PublishBatchAs(ctx context.Context, ms []driver.Message, idOf func(j int) Identity) []error {
	var dones []func(error, time.Duration)
	if c.hooked(ctx) {
		dones = make([]func(error, time.Duration), len(ms))
	}
	for i := range dones {
		var id Identity
		if idOf != nil {
			id = idOf(i)
		}
		_, ms[i], dones[i] = c.tel.PublishStart(ctx, ms[i], id)
	}
	start := time.Now()
	var errs []error
	if b, ok := c.t.(driver.BatchPublisher); ok {
		errs = b.PublishBatch(ctx, ms)
	} else {
		errs = make([]error, len(ms))
		var wg sync.WaitGroup
		for i := range ms {
			wg.Go(func() { errs[i] = c.t.Publish(ctx, ms[i]) })
		}
		wg.Wait()
	}
	d := time.Since(start)
	for i, done := range dones {
		done(errs[i], d)
	}
	return errs
}

// hooked reports whether a publish within ctx goes through the telemetry:
// something records publishes, or ctx carries a trace context to pass on.
// When neither holds the telemetry has nothing to do, and the publish path
// skips it (and the clock readings it would take).
func (c *Conn) hooked(ctx context.Context) bool {
	return c.tel.Observing() || c.tel.Carries(ctx)
}

// Tracing reports whether spans are recorded now: packages built on the
// connection ask it before they build a span.
func (c *Conn) Tracing() bool { return c.tel.Tracing() }

// MeterProvider is the meter provider the connection records through.
func (c *Conn) MeterProvider() metric.MeterProvider { return c.tel.MeterProvider() }

// TracerProvider is the tracer provider the connection records through.
func (c *Conn) TracerProvider() trace.TracerProvider { return c.tel.TracerProvider() }

// Capabilities is what the broker supports, as far as the driver says.
func (c *Conn) Capabilities() driver.Capabilities {
	if r, ok := c.t.(driver.CapabilityReporter); ok {
		return r.Capabilities()
	}
	return driver.Capabilities{}
}

// Declared holds the retry policies queues were declared with by the
// topologies applied on the connection (topology.Topology.Apply), so that
// a consumer of such a queue takes that policy.
func (c *Conn) Declared() *declare.Retries { return &c.declared }

// Logger is the connection's logger, never nil: packages built on the
// connection log operator-level events through it, never one line per
// message, and never a secret.
func (c *Conn) Logger() *slog.Logger { return c.log }

// isNil reports whether v is a nil pointer, whose embedded handle cannot
// be read.
func isNil(v any) bool {
	r := reflect.ValueOf(v)
	return r.Kind() == reflect.Pointer && r.IsNil()
}
