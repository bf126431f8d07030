package route

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"
	"time"

	acemqtel "github.com/acemq/acemq/internal/telemetry"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/plumbing"
	"github.com/acemq/acemq/internal/wire"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Output is what a step hands on: a payload for the next step (Forward) or
// nothing (End). The zero Output is End.
type Output[T any] struct {
	payload  T
	typ      string
	headers  map[string]any
	produced bool
}

// Forward hands payload to the next step.
func Forward[T any](payload T) Output[T] { return Output[T]{payload: payload, produced: true} }

// End produces nothing: the run ends at this step. Before the last step
// that is recorded as ended_early.
func End[T any]() Output[T] { return Output[T]{} }

// As sets the next hop's type (x-acemq-type); without it the type is the
// next hop's routing key.
func (r Output[T]) As(messageType string) Output[T] { r.typ = messageType; return r }

// Header adds an application header to the next hop. A reserved
// x-acemq-* name fails the step as an unprocessable message.
func (r Output[T]) Header(name string, value any) Output[T] {
	h := make(map[string]any, len(r.headers)+1)
	maps.Copy(h, r.headers)
	h[name] = value
	r.headers = h
	return r
}

// Produced reports whether the step handed on a payload.
func (r Output[T]) Produced() bool { return r.produced }

// Payload is the payload handed on.
func (r Output[T]) Payload() T { return r.payload }

// Handler does one step's work. It returns what to hand on, or an error:
// as with acemq.FromError, an error is retried through the consumer's retry
// policy and one marked acemq.Fatal is dead-lettered at once. The message's
// envelope describes the incoming hop; its route fields say where the run
// is.
type Handler[In, Out any] func(ctx context.Context, m acemq.Message[In]) (Output[Out], error)

// Step runs the consumer of one step of p, on the queue {pipeline}.{step},
// through acemq.Consume (so options such as acemq.WithRetry,
// WithConcurrency and WithPrefetch pass through, and the step's dead-letter
// half is declared like any consumer's). It first declares the pipeline's exchange, this step's
// queue and its binding.
//
// On arrival the route carried by the message wins over the step's place in
// the declaration; a message carrying a JSON slip follows the slip. A
// message with neither gets a fresh route of p, positioned at this step,
// with a new run id.
func Step[In, Out any](ctx context.Context, p *Pipeline, step string, h Handler[In, Out], opts ...acemq.ConsumeOption) (*acemq.Consumer, error) {
	if h == nil {
		return nil, errors.New("route: Step needs a handler")
	}
	if p.index(step) < 0 {
		return nil, fmt.Errorf("route: %q is not a step of pipeline %q (steps: %s)", step, p.name, strings.Join(p.steps, ", "))
	}
	if err := p.declareStep(ctx, step); err != nil {
		return nil, err
	}
	s := &server[In, Out]{conn: p.conn, plumb: p.plumb, queue: p.Queue(step), pipeline: p, step: step, h: h, rec: p.rec,
		codec: plumbing.Carried(opts, p.codec)}
	all := append([]acemq.ConsumeOption{acemq.WithCodec(p.codec)}, opts...)
	return acemq.Consume(ctx, p.conn, s.queue, s.handle, all...)
}

// Serve runs a consumer of queue for runs along JSON routing slips: each
// message's handler result is forwarded to the slip's next stop. The queue
// is not declared (the application's topology owns it); options pass
// through to acemq.Consume. A message without a slip is dead-lettered as
// unprocessable, since nothing says where it goes next. The pipeline
// attribute of the run metrics is the queue's name.
func Serve[In, Out any](ctx context.Context, conn *acemq.Conn, queue string, h Handler[In, Out], opts ...acemq.ConsumeOption) (*acemq.Consumer, error) {
	if h == nil {
		return nil, errors.New("route: Serve needs a handler")
	}
	pl := plumbing.ConnOf(conn)
	s := &server[In, Out]{conn: conn, plumb: pl, queue: queue, h: h, rec: newRecorder(pl), codec: plumbing.Carried(opts, acemq.JSON)}
	return acemq.Consume(ctx, conn, queue, s.handle, opts...)
}

type server[In, Out any] struct {
	conn     *acemq.Conn
	plumb    *plumbing.Conn
	queue    string
	pipeline *Pipeline // nil for Serve
	step     string
	h        Handler[In, Out]
	codec    acemq.Codec
	rec      *recorder
}

// hop is where a run stands on arrival.
type hop struct {
	slip     *Slip // as it arrived
	advanced Slip  // with the current stop done, for the next hop
	declared bool
	route    []string
	position int
	runID    string
}

func (s *server[In, Out]) handle(ctx context.Context, m acemq.Message[In]) acemq.Ack {
	env := m.Envelope
	var at hop
	if raw, ok := env.Header(wire.HeaderRoutingSlip); ok {
		str, ok := wire.String(raw)
		if !ok {
			return acemq.Reject(acemq.Fatal(fmt.Errorf("the %s header is not a string (%T)", HeaderRoutingSlip, raw)))
		}
		slip, err := ParseSlip([]byte(str))
		if err != nil {
			return acemq.Reject(acemq.Fatal(fmt.Errorf("the %s header cannot be read: %w", HeaderRoutingSlip, err)))
		}
		at.slip = &slip
		at.advanced = slip.Advance(time.Now())
	}
	if f := env.Fields(); len(f.Route) > 0 {
		at.declared, at.route, at.position, at.runID = true, f.Route, f.RoutePosition, f.RouteID
	}
	switch {
	case at.slip != nil:
	case at.declared && s.pipeline == nil:
		return acemq.Reject(acemq.Fatal(fmt.Errorf("the message carries a declared route (%s) but the consumer of %q belongs to no pipeline, so there is no exchange to forward it to; consume it with route.Step", strings.Join(at.route, ","), s.queue)))
	case at.declared:
	case s.pipeline != nil:
		// No route: a fresh one, positioned at this step.
		at.declared, at.route, at.position, at.runID = true, s.pipeline.steps, s.pipeline.index(s.step), uuid.NewString()
		withRoute, err := env.Change(func(f *acemq.Fields) { f.Route, f.RoutePosition, f.RouteID = at.route, at.position, at.runID })
		if err != nil {
			return acemq.Reject(acemq.Fatal(err))
		}
		m.Envelope = withRoute
	default:
		return acemq.Reject(acemq.Fatal(fmt.Errorf("the message carries no %s header, so nothing says where it goes next", wire.HeaderRoutingSlip)))
	}

	res, err := s.h(ctx, m)
	if err != nil {
		return acemq.FromError(err)
	}

	target, last := s.next(at)
	stepLabel := s.stepLabel(at)
	if last {
		s.finish(ctx, m.Envelope, stepLabel, OutcomeCompleted)
		return acemq.Accept()
	}
	if !res.produced {
		s.finish(ctx, m.Envelope, stepLabel, OutcomeEndedEarly)
		return acemq.Accept()
	}
	// A hop that is not confirmed is retried through the step's policy
	// (and so dead-lettered rather than lost); one that can never be
	// published is marked fatal.
	return acemq.FromError(s.forward(ctx, m.Envelope, at, target, res))
}

// next is the next hop's destination, or last when this step ends the run.
func (s *server[In, Out]) next(at hop) (target Stop, last bool) {
	if at.slip != nil {
		next, ok := at.advanced.Current()
		return next, !ok
	}
	n := at.position + 1
	if n >= len(at.route) {
		return Stop{}, true
	}
	return Stop{Exchange: s.pipeline.name, RoutingKey: at.route[n], Name: at.route[n]}, false
}

func (s *server[In, Out]) stepLabel(at hop) string {
	if s.step != "" {
		return s.step
	}
	if at.slip != nil {
		if cur, ok := at.slip.Current(); ok {
			return cur.label()
		}
	}
	return s.queue
}

func (s *server[In, Out]) pipelineLabel() string {
	if s.pipeline != nil {
		return s.pipeline.name
	}
	return s.queue
}

// headersNotCarried describe the incoming delivery rather than the run, so
// they do not travel to the next hop.
var headersNotCarried = []string{
	HeaderRoutingSlip, wire.HeaderReplayedFrom, wire.HeaderReplayedAt, wire.HeaderReplayCount,
	"traceparent", "tracestate", "x-death", "x-first-death-exchange", "x-first-death-queue",
	"x-first-death-reason", "x-last-death-exchange", "x-last-death-queue", "x-last-death-reason",
	"x-stream-offset",
}

// forward publishes the next hop (docs/wire.md §9.4).
func (s *server[In, Out]) forward(ctx context.Context, in acemq.Envelope, at hop, target Stop, res Output[Out]) error {
	body, err := s.codec.Encode(res.payload)
	if err != nil {
		return acemq.Fatal(fmt.Errorf("the step's output cannot be encoded with %s: %w", s.codec.ContentType(), err))
	}
	headers := in.Headers()
	for _, h := range headersNotCarried {
		delete(headers, h)
	}
	maps.Copy(headers, res.headers)
	if at.slip != nil {
		headers[wire.HeaderRoutingSlip] = at.advanced.String()
	}
	env, err := in.Derive().Change(func(f *acemq.Fields) {
		f.FirstSeen, f.Origin, f.Type, f.Headers = in.FirstSeen(), s.conn.Origin(), res.typ, headers
		if at.declared {
			f.Route, f.RoutePosition, f.RouteID = at.route, at.position+1, at.runID
			if f.RouteID == "" {
				f.RouteID = uuid.NewString()
			}
		}
	})
	if err != nil {
		return acemq.Fatal(fmt.Errorf("the step's output headers: %w", err))
	}
	err = publish(ctx, s.plumb, target.Exchange, target.RoutingKey, env, s.codec.ContentType(), body)
	if err != nil {
		return fmt.Errorf("forwarding to exchange %q with routing key %q: %w", target.Exchange, target.RoutingKey, err)
	}
	return nil
}

func (s *server[In, Out]) finish(ctx context.Context, env acemq.Envelope, step string, outcome Outcome) {
	pipeline := s.pipelineLabel()
	age, known := env.Age()
	s.rec.record(ctx, pipeline, step, outcome, age, known)
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.AddEvent("pipeline.run_finished", trace.WithAttributes(
			attribute.String("pipeline", pipeline),
			attribute.String("step", step),
			attribute.String("outcome", string(outcome)),
		))
		if known {
			span.SetAttributes(attribute.Int64("messaging.acemq.run_age_ms", age.Milliseconds()))
		}
	}
}

// recorder records the run metrics through the connection's meter provider.
type recorder struct {
	total    metric.Int64Counter
	duration metric.Float64Histogram
}

func newRecorder(conn *plumbing.Conn) *recorder {
	m := conn.MeterProvider().Meter(acemqtel.Scope)
	// On error the API still returns a usable (no-op) instrument.
	total, _ := m.Int64Counter(acemqtel.RunTotal, metric.WithDescription("Pipeline runs that ended, by pipeline, step and outcome."))
	duration, _ := m.Float64Histogram(acemqtel.RunDuration, metric.WithUnit("s"), metric.WithExplicitBucketBoundaries(acemqtel.DurationBuckets()...),
		metric.WithDescription("Age of a pipeline run when it ended, from the first message's first-seen time."))
	return &recorder{total: total, duration: duration}
}

func (r *recorder) record(ctx context.Context, pipeline, step string, outcome Outcome, age time.Duration, known bool) {
	attrs := metric.WithAttributes(
		attribute.String("pipeline", pipeline),
		attribute.String("step", step),
		attribute.String("outcome", string(outcome)),
	)
	if r.total != nil {
		r.total.Add(ctx, 1, attrs)
	}
	if r.duration != nil && known {
		r.duration.Record(ctx, age.Seconds(), attrs)
	}
}
