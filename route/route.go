// Package route sends a message along a route of steps: each step's handler
// does its work and the library forwards the result to the next step, until
// the last step ends the run.
//
// Two wire forms carry a route, and every consumer here reads both
// (WIRE.md §9):
//
//   - a declared route, for a Pipeline: the step names in x-acemq-route,
//     the position of the step the message is for in
//     x-acemq-route-position, and the run's id in x-acemq-route-id. The
//     exchange is the pipeline's name and each step's routing key is its
//     name.
//   - a JSON routing slip in the acemq-routing-slip header (Slip): each stop
//     names its own exchange and routing key, and the slip, not any
//     pipeline, decides where the message goes next.
//
// When a message carries both, the JSON slip wins. A step writes back the
// form the message arrived in.
//
// Every hop is a new message (WIRE.md §9.4): a new id, the correlation
// carried, the causation set to the incoming id, attempt 1, and the
// first-seen time carried, so the envelope's age is the age of the whole
// run. Hops are published confirmed and mandatory through Conn.Publish;
// the incoming message is acknowledged only after the hop is confirmed.
package route

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"regexp"
	"slices"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Run outcomes (WIRE.md §10.3).
const (
	// OutcomeCompleted: the run's last step finished.
	OutcomeCompleted = "completed"
	// OutcomeEndedEarly: a step before the last produced nothing.
	OutcomeEndedEarly = "ended_early"
)

// Metric names (WIRE.md §10.1).
const (
	MetricRunTotal    = "acemq.pipeline.run.total"
	MetricRunDuration = "acemq.pipeline.run.duration"
)

var stepName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.\-]*$`)

// ValidStepName reports whether name is a valid step name: letters, digits,
// dots and dashes, beginning with a letter or digit, and so never a comma
// (the route separator).
func ValidStepName(name string) bool { return stepName.MatchString(name) }

// Pipeline is a declared route (WIRE.md §5.8, §9.2): a name and its steps
// in order. Its topology is a direct, durable exchange named after the
// pipeline and, per step, a durable queue {pipeline}.{step} bound to it with
// the step's name. A Pipeline is safe for concurrent use.
type Pipeline struct {
	conn  *acemq.Conn
	name  string
	steps []string
	codec acemq.Codec
	rec   *recorder
}

// PipelineOption configures NewPipeline.
type PipelineOption func(*Pipeline)

// WithCodec sets the codec the pipeline starts runs with and that its steps
// read and forward with (default acemq.JSON). A step's own acemq.WithCodec
// overrides it for that step.
func WithCodec(c acemq.Codec) PipelineOption { return func(p *Pipeline) { p.codec = c } }

// NewPipeline describes a pipeline named name with the given steps, in
// order. It declares nothing; see Declare. Names and steps must match
// ^[A-Za-z0-9][A-Za-z0-9.\-]*$, and a step may appear only once.
func NewPipeline(conn *acemq.Conn, name string, steps []string, opts ...PipelineOption) (*Pipeline, error) {
	if conn == nil {
		return nil, errors.New("route: NewPipeline needs a connection")
	}
	if !ValidStepName(name) {
		return nil, fmt.Errorf("route: the pipeline name %q is not valid: use letters, digits, dots and dashes, beginning with a letter or digit", name)
	}
	if len(steps) == 0 {
		return nil, fmt.Errorf("route: the pipeline %q needs at least one step", name)
	}
	seen := map[string]bool{}
	for _, s := range steps {
		if !ValidStepName(s) {
			return nil, fmt.Errorf("route: the step name %q of pipeline %q is not valid: use letters, digits, dots and dashes, beginning with a letter or digit (never a comma)", s, name)
		}
		if seen[s] {
			return nil, fmt.Errorf("route: the step %q appears twice in pipeline %q", s, name)
		}
		seen[s] = true
	}
	p := &Pipeline{conn: conn, name: name, steps: slices.Clone(steps), codec: acemq.JSON}
	for _, o := range opts {
		o(p)
	}
	if p.codec == nil {
		p.codec = acemq.JSON
	}
	p.rec = newRecorder(conn)
	return p, nil
}

// Name is the pipeline's name, which is also its exchange.
func (p *Pipeline) Name() string { return p.name }

// Steps returns a copy of the step names, in order.
func (p *Pipeline) Steps() []string { return slices.Clone(p.steps) }

// Queue is the name of a step's queue, {pipeline}.{step}.
func (p *Pipeline) Queue(step string) string { return p.name + "." + step }

func (p *Pipeline) index(step string) int { return slices.Index(p.steps, step) }

// Declare declares the pipeline's exchange (direct, durable) and every
// step's queue (durable; quorum where the broker supports it) bound to it
// with the step's name. It is idempotent. The dead-letter half of each
// step queue is declared by the step's consumer, like any consumer's.
func (p *Pipeline) Declare(ctx context.Context) error {
	for _, s := range p.steps {
		if err := p.declareStep(ctx, s); err != nil {
			return err
		}
	}
	return nil
}

func (p *Pipeline) declareStep(ctx context.Context, step string) error {
	t := p.conn.Transport()
	if err := t.DeclareExchange(ctx, driver.Exchange{Name: p.name, Kind: driver.Direct, Durable: true}); err != nil {
		return fmt.Errorf("route: declaring the exchange of pipeline %q: %w", p.name, err)
	}
	args := driver.Table{}
	if t.Capabilities().QuorumQueues {
		args["x-queue-type"] = "quorum"
	}
	q := p.Queue(step)
	if _, err := t.DeclareQueue(ctx, driver.Queue{Name: q, Durable: true, Args: args}); err != nil {
		return fmt.Errorf("route: declaring the queue of step %q: %w", q, err)
	}
	if err := t.Bind(ctx, driver.Binding{Exchange: p.name, Queue: q, RoutingKey: step}); err != nil {
		return fmt.Errorf("route: binding %q to exchange %q: %w", q, p.name, err)
	}
	return nil
}

// StartOption configures Pipeline.Start and StartSlip.
type StartOption func(*startConfig)

type startConfig struct {
	env   acemq.Envelope
	codec acemq.Codec
}

// StartWith starts the run with env (built with acemq.NewEnvelope) for its
// type, correlation, causation and application headers. Its route fields
// are replaced by the run's.
func StartWith(env acemq.Envelope) StartOption { return func(c *startConfig) { c.env = env } }

// StartCodec encodes the first message with c instead of the pipeline's
// codec (or acemq.JSON for StartSlip).
func StartCodec(c acemq.Codec) StartOption { return func(c2 *startConfig) { c2.codec = c } }

// Start begins a run: it publishes payload to the pipeline's exchange with
// the first step's name as routing key, carrying the whole route at
// position 0 and a new run id, which it returns. The publish is confirmed
// and mandatory: a first step whose queue is not declared fails with an
// *acemq.UnroutableError (call Declare first).
func (p *Pipeline) Start(ctx context.Context, payload any, opts ...StartOption) (runID string, err error) {
	cfg := startConfig{codec: p.codec}
	for _, o := range opts {
		o(&cfg)
	}
	body, err := cfg.codec.Encode(payload)
	if err != nil {
		return "", fmt.Errorf("route: encoding the first message of pipeline %q: %w", p.name, err)
	}
	runID = uuid.NewString()
	env, err := freshEnvelope(cfg.env)
	if err != nil {
		return "", err
	}
	env = env.WithRoute(p.steps, 0, runID)
	if env.Origin() == "" {
		env = env.WithOrigin(p.conn.Origin())
	}
	err = p.conn.Publish(ctx, acemq.Outbound{
		Exchange:      p.name,
		RoutingKey:    p.steps[0],
		Envelope:      env,
		ContentType:   cfg.codec.ContentType(),
		Body:          body,
		AlwaysConfirm: true,
	})
	if err != nil {
		return "", fmt.Errorf("route: starting a run of pipeline %q at step %q: %w", p.name, p.steps[0], err)
	}
	return runID, nil
}

// StartSlip begins an ad-hoc run along a JSON routing slip: it publishes
// payload to the slip's first stop with the slip in the acemq-routing-slip
// header, confirmed and mandatory. It returns the envelope sent.
func StartSlip(ctx context.Context, conn *acemq.Conn, slip Slip, payload any, opts ...StartOption) (acemq.Envelope, error) {
	first, ok := slip.Current()
	if !ok {
		return acemq.Envelope{}, errors.New("route: StartSlip needs a slip with at least one step")
	}
	cfg := startConfig{codec: acemq.JSON}
	for _, o := range opts {
		o(&cfg)
	}
	body, err := cfg.codec.Encode(payload)
	if err != nil {
		return acemq.Envelope{}, fmt.Errorf("route: encoding the first message of a slip run: %w", err)
	}
	env, err := freshEnvelope(cfg.env)
	if err != nil {
		return acemq.Envelope{}, err
	}
	if env, err = env.WithHeader(acemq.HeaderRoutingSlip, slip.String()); err != nil {
		return acemq.Envelope{}, err
	}
	if env.Origin() == "" {
		env = env.WithOrigin(conn.Origin())
	}
	err = conn.Publish(ctx, acemq.Outbound{
		Exchange:      first.Exchange,
		RoutingKey:    first.RoutingKey,
		Envelope:      env,
		ContentType:   cfg.codec.ContentType(),
		Body:          body,
		AlwaysConfirm: true,
	})
	if err != nil {
		return env, fmt.Errorf("route: starting a slip run at exchange %q, routing key %q: %w", first.Exchange, first.RoutingKey, err)
	}
	return env, nil
}

// freshEnvelope is env as the start of a new run: its fields, without any
// unknown x-acemq-* headers it may have been read with (those belong to the
// message it was read from, WIRE.md §2.5).
func freshEnvelope(env acemq.Envelope) (acemq.Envelope, error) {
	return acemq.NewEnvelope(env.Fields())
}

// Result is what a step hands on: a payload for the next step (Forward) or
// nothing (End). The zero Result is End.
type Result[T any] struct {
	payload  T
	typ      string
	headers  map[string]any
	produced bool
}

// Forward hands payload to the next step.
func Forward[T any](payload T) Result[T] { return Result[T]{payload: payload, produced: true} }

// End produces nothing: the run ends at this step. Before the last step
// that is recorded as ended_early.
func End[T any]() Result[T] { return Result[T]{} }

// As sets the next hop's type (x-acemq-type); without it the type is the
// next hop's routing key.
func (r Result[T]) As(messageType string) Result[T] { r.typ = messageType; return r }

// WithHeader adds an application header to the next hop. A reserved
// x-acemq-* name fails the step as an unprocessable message.
func (r Result[T]) WithHeader(name string, value any) Result[T] {
	h := make(map[string]any, len(r.headers)+1)
	maps.Copy(h, r.headers)
	h[name] = value
	r.headers = h
	return r
}

// Produced reports whether the step handed on a payload.
func (r Result[T]) Produced() bool { return r.produced }

// Payload is the payload handed on.
func (r Result[T]) Payload() T { return r.payload }

// Handler does one step's work. It returns what to hand on, or an error:
// as with acemq.Result, an error is retried through the consumer's retry
// policy and one marked acemq.Fatal is dead-lettered at once. The message's
// envelope describes the incoming hop; its route fields say where the run
// is.
type Handler[In, Out any] func(ctx context.Context, m acemq.Message[In]) (Result[Out], error)

// Step runs the consumer of one step of p, on the queue {pipeline}.{step},
// through acemq.Consume (so options such as acemq.WithRetry, Concurrency and
// Prefetch pass through, and the step's dead-letter half is declared like
// any consumer's). It first declares the pipeline's exchange, this step's
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
	s := &server[In, Out]{conn: p.conn, queue: p.Queue(step), pipeline: p, step: step, h: h, rec: p.rec,
		codec: codecOf(opts, p.codec)}
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
	s := &server[In, Out]{conn: conn, queue: queue, h: h, rec: newRecorder(conn), codec: codecOf(opts, acemq.JSON)}
	return acemq.Consume(ctx, conn, queue, s.handle, opts...)
}

// codecOf is the codec the last acemq.WithCodec among opts chose, else def.
func codecOf(opts []acemq.ConsumeOption, def acemq.Codec) acemq.Codec {
	c := def
	for _, o := range opts {
		if co, ok := o.(acemq.CodecOption); ok && co.Codec() != nil {
			c = co.Codec()
		}
	}
	return c
}

type server[In, Out any] struct {
	conn     *acemq.Conn
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
	if raw, ok := env.Header(acemq.HeaderRoutingSlip); ok {
		str, ok := wire.String(raw)
		if !ok {
			return acemq.Reject(acemq.Fatal(fmt.Errorf("the %s header is not a string (%T)", acemq.HeaderRoutingSlip, raw)))
		}
		slip, err := ParseSlip([]byte(str))
		if err != nil {
			return acemq.Reject(acemq.Fatal(fmt.Errorf("the %s header cannot be read: %w", acemq.HeaderRoutingSlip, err)))
		}
		at.slip = &slip
		at.advanced = slip.Advance(time.Now())
	}
	if r := env.Route(); len(r) > 0 {
		at.declared, at.route, at.position, at.runID = true, r, env.RoutePosition(), env.RouteID()
	}
	switch {
	case at.slip != nil:
	case at.declared && s.pipeline == nil:
		return acemq.Reject(acemq.Fatal(fmt.Errorf("the message carries a declared route (%s) but the consumer of %q belongs to no pipeline, so there is no exchange to forward it to; consume it with route.Step", strings.Join(at.route, ","), s.queue)))
	case at.declared:
	case s.pipeline != nil:
		// No route: a fresh one, positioned at this step.
		at.declared, at.route, at.position, at.runID = true, s.pipeline.steps, s.pipeline.index(s.step), uuid.NewString()
		m.Envelope = env.WithRoute(at.route, at.position, at.runID)
	default:
		return acemq.Reject(acemq.Fatal(fmt.Errorf("the message carries no %s header, so nothing says where it goes next", acemq.HeaderRoutingSlip)))
	}

	res, err := s.h(ctx, m)
	if err != nil {
		return acemq.Result(err)
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
	return acemq.Result(s.forward(ctx, m.Envelope, at, target, res))
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
	acemq.HeaderRoutingSlip, acemq.HeaderReplayedFrom, acemq.HeaderReplayedAt, acemq.HeaderReplayCount,
	"traceparent", "tracestate", "x-death", "x-first-death-exchange", "x-first-death-queue",
	"x-first-death-reason", "x-last-death-exchange", "x-last-death-queue", "x-last-death-reason",
	"x-stream-offset",
}

// forward publishes the next hop (WIRE.md §9.4).
func (s *server[In, Out]) forward(ctx context.Context, in acemq.Envelope, at hop, target Stop, res Result[Out]) error {
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
		headers[acemq.HeaderRoutingSlip] = at.advanced.String()
	}
	env, err := in.Derive().
		WithFirstSeen(in.FirstSeen()).
		WithOrigin(s.conn.Origin()).
		WithType(res.typ).
		WithHeaders(headers)
	if err != nil {
		return acemq.Fatal(fmt.Errorf("the step's output headers: %w", err))
	}
	if at.declared {
		runID := at.runID
		if runID == "" {
			runID = uuid.NewString()
		}
		env = env.WithRoute(at.route, at.position+1, runID)
	}
	err = s.conn.Publish(ctx, acemq.Outbound{
		Exchange:      target.Exchange,
		RoutingKey:    target.RoutingKey,
		Envelope:      env,
		ContentType:   s.codec.ContentType(),
		Body:          body,
		AlwaysConfirm: true,
	})
	if err != nil {
		return fmt.Errorf("forwarding to exchange %q with routing key %q: %w", target.Exchange, target.RoutingKey, err)
	}
	return nil
}

func (s *server[In, Out]) finish(ctx context.Context, env acemq.Envelope, step, outcome string) {
	pipeline := s.pipelineLabel()
	age, known := env.Age()
	s.rec.record(ctx, pipeline, step, outcome, age, known)
	span := trace.SpanFromContext(ctx)
	if span.IsRecording() {
		span.AddEvent("pipeline.run_finished", trace.WithAttributes(
			attribute.String("pipeline", pipeline),
			attribute.String("step", step),
			attribute.String("outcome", outcome),
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

func newRecorder(conn *acemq.Conn) *recorder {
	m := conn.MeterProvider().Meter(acemq.InstrumentationScope)
	// On error the API still returns a usable (no-op) instrument.
	total, _ := m.Int64Counter(MetricRunTotal, metric.WithDescription("Pipeline runs that ended, by pipeline, step and outcome."))
	duration, _ := m.Float64Histogram(MetricRunDuration, metric.WithUnit("s"),
		metric.WithDescription("Age of a pipeline run when it ended, from the first message's first-seen time."))
	return &recorder{total: total, duration: duration}
}

func (r *recorder) record(ctx context.Context, pipeline, step, outcome string, age time.Duration, known bool) {
	attrs := metric.WithAttributes(
		attribute.String("pipeline", pipeline),
		attribute.String("step", step),
		attribute.String("outcome", outcome),
	)
	if r.total != nil {
		r.total.Add(ctx, 1, attrs)
	}
	if r.duration != nil && known {
		r.duration.Record(ctx, age.Seconds(), attrs)
	}
}
