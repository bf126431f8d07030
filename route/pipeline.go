package route

import (
	"context"
	"errors"
	"fmt"
	"regexp"
	"slices"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/topology"
	"github.com/google/uuid"
)

var stepName = regexp.MustCompile(`^[A-Za-z0-9][A-Za-z0-9.\-]*$`)

// ValidStepName reports whether name is a valid step name: letters, digits,
// dots and dashes, beginning with a letter or digit, and so never a comma
// (the route separator).
func ValidStepName(name string) bool { return stepName.MatchString(name) }

// Pipeline is a declared route (docs/wire.md §5.8, §9.2): a name and its steps
// in order. Its topology is a direct, durable exchange named after the
// pipeline and, per step, a durable queue {pipeline}.{step} bound to it with
// the step's name. A Pipeline is safe for concurrent use.
type Pipeline struct {
	conn  *acemq.Conn
	plumb *engine.Conn
	name  string
	steps []string
	codec acemq.Codec
	rec   *recorder
}

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
	cfg := pipelineConfig{codec: acemq.JSON}
	for _, o := range opts {
		o.applyPipeline(&cfg)
	}
	if cfg.codec == nil {
		return nil, fmt.Errorf("route: the pipeline %q was given WithCodec(nil): pass the codec its messages are written in", name)
	}
	p := &Pipeline{conn: conn, plumb: engine.Of(conn), name: name, steps: slices.Clone(steps), codec: cfg.codec}
	p.rec = newRecorder(p.plumb)
	return p, nil
}

// Name is the pipeline's name, which is also its exchange.
func (p *Pipeline) Name() string { return p.name }

// Steps returns a copy of the step names, in order.
func (p *Pipeline) Steps() []string { return slices.Clone(p.steps) }

// Queue is the name of a step's queue, {pipeline}.{step}.
func (p *Pipeline) Queue(step string) string { return p.name + "." + step }

func (p *Pipeline) index(step string) int { return slices.Index(p.steps, step) }

// Topology is the pipeline's topology: its exchange (direct, durable) and
// every step's queue (durable, so a quorum queue) bound to it with the
// step's name. The dead-letter half of each step queue is declared by the
// step's consumer, like any consumer's.
func (p *Pipeline) Topology() *topology.Topology { return p.topology(p.steps...) }

func (p *Pipeline) topology(steps ...string) *topology.Topology {
	t := topology.New().Exchange(p.name, topology.ExchangeDirect)
	for _, s := range steps {
		t.Queue(p.Queue(s)).Bind(p.name, p.Queue(s), s)
	}
	return t
}

// Declare declares the pipeline's topology (see Topology). It is
// idempotent.
func (p *Pipeline) Declare(ctx context.Context) error {
	if err := p.Topology().Apply(ctx, p.conn); err != nil {
		return fmt.Errorf("route: declaring pipeline %q: %w", p.name, err)
	}
	return nil
}

func (p *Pipeline) declareStep(ctx context.Context, step string) error {
	if err := p.topology(step).Apply(ctx, p.conn); err != nil {
		return fmt.Errorf("route: declaring step %q of pipeline %q: %w", step, p.name, err)
	}
	return nil
}

// Start begins a run: it publishes payload to the pipeline's exchange with
// the first step's name as routing key, carrying the whole route at
// position 0 and a new run id, which it returns. The publish is confirmed
// and mandatory: a first step whose queue is not declared fails with an
// *driver.ReturnError (call Declare first).
func (p *Pipeline) Start(ctx context.Context, payload any, opts ...StartOption) (runID string, err error) {
	cfg := startConfig{codec: p.codec}
	for _, o := range opts {
		o.applyStart(&cfg)
	}
	if cfg.codec == nil {
		return "", fmt.Errorf("route: starting a run of pipeline %q: WithCodec(nil) was given", p.name)
	}
	body, err := cfg.codec.Encode(payload)
	if err != nil {
		return "", fmt.Errorf("route: encoding the first message of pipeline %q: %w", p.name, err)
	}
	runID = uuid.NewString()
	env, err := freshEnvelope(cfg.env, p.conn.Origin(), func(f *acemq.Fields) {
		f.Route, f.RoutePosition, f.RouteID = p.steps, 0, runID
	})
	if err != nil {
		return "", err
	}
	err = publish(ctx, p.plumb, p.name, p.steps[0], env, cfg.codec.ContentType(), body)
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
		o.applyStart(&cfg)
	}
	if cfg.codec == nil {
		return acemq.Envelope{}, errors.New("route: starting a slip run: WithCodec(nil) was given")
	}
	body, err := cfg.codec.Encode(payload)
	if err != nil {
		return acemq.Envelope{}, fmt.Errorf("route: encoding the first message of a slip run: %w", err)
	}
	env, err := freshEnvelope(cfg.env, conn.Origin(), func(f *acemq.Fields) {
		f.Headers[HeaderRoutingSlip] = slip.String()
	})
	if err != nil {
		return acemq.Envelope{}, err
	}
	err = publish(ctx, engine.Of(conn), first.Exchange, first.RoutingKey, env, cfg.codec.ContentType(), body)
	if err != nil {
		return env, fmt.Errorf("route: starting a slip run at exchange %q, routing key %q: %w", first.Exchange, first.RoutingKey, err)
	}
	return env, nil
}

// freshEnvelope is env as the start of a new run: its fields, changed by
// set, with the connection's origin when it has none, and without any
// unknown x-acemq-* headers it may have been read with (those belong to the
// message it was read from, docs/wire.md §2.5).
func freshEnvelope(env acemq.Envelope, origin string, set func(*acemq.Fields)) (acemq.Envelope, error) {
	f := env.Fields()
	set(&f)
	if f.Origin == "" {
		f.Origin = origin
	}
	return acemq.NewEnvelope(f)
}

// publish sends a message the library makes for itself (a run's first
// message, a hop): confirmed and mandatory, through the connection's
// publish path.
func publish(ctx context.Context, p *engine.Conn, exchange, routingKey string, env acemq.Envelope, contentType string, body []byte) error {
	return p.Publish(ctx, driver.Message{
		Exchange:      exchange,
		RoutingKey:    routingKey,
		Mandatory:     true,
		AlwaysConfirm: true,
		ContentType:   contentType,
		MessageID:     env.ID(),
		Headers:       env.AppendHeaders(nil, routingKey),
		Body:          body,
	})
}
