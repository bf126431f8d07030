package acemq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"strings"

	"github.com/acemq/acemq/driver"
)

// Exchange kinds, for Topology.Exchange.
const (
	ExchangeDirect  = driver.Direct
	ExchangeTopic   = driver.Topic
	ExchangeFanout  = driver.Fanout
	ExchangeHeaders = driver.Headers
)

// Topology is the application's broker topology written in code: exchanges,
// queues, bindings, and the dead-letter and retry halves of its queues. Build
// one with NewTopology and the chained methods, then Validate it, print its
// Plan, Apply it, DryRun it or ask for its Drift:
//
//	topo := acemq.NewTopology().
//		Exchange("orders", acemq.ExchangeTopic).
//		Queue("orders.new", acemq.WithDeadLettering()).
//		Bind("orders", "orders.new", "order.*")
//
// Defaults follow the family's contract (WIRE.md §5): exchanges and queues are
// durable, durable queues are quorum queues, exclusive, auto-delete and
// transient queues are classic. Mistakes (an explicit quorum queue that is
// exclusive, a dead-lettering queue that already sets a dead-letter argument,
// the same queue declared twice with different settings) are collected while
// building and reported by Validate, Plan and Apply; nothing is sent to the
// broker until Apply.
//
// The builder methods change t and return it; build a Topology on one
// goroutine. Once built, its methods that talk to a broker may be called
// from many.
type Topology struct {
	decls []Declaration
	errs  []error
}

// NewTopology returns an empty topology.
func NewTopology() *Topology { return &Topology{} }

// ExchangeOption configures an exchange declared with Topology.Exchange.
type ExchangeOption interface{ applyExchange(*driver.Exchange) }

type exchangeOptionFunc func(*driver.Exchange)

func (f exchangeOptionFunc) applyExchange(e *driver.Exchange) { f(e) }

// TransientExchange declares the exchange non-durable: it does not survive
// a broker restart.
func TransientExchange() ExchangeOption {
	return exchangeOptionFunc(func(e *driver.Exchange) { e.Durable = false })
}

// AutoDeleteExchange declares the exchange auto-delete: the broker deletes
// it when its last binding goes.
func AutoDeleteExchange() ExchangeOption {
	return exchangeOptionFunc(func(e *driver.Exchange) { e.AutoDelete = true })
}

// InternalExchange declares the exchange internal: it can only be published
// to from other exchanges.
func InternalExchange() ExchangeOption {
	return exchangeOptionFunc(func(e *driver.Exchange) { e.Internal = true })
}

// ExchangeArguments sets the exchange's arguments (for example
// alternate-exchange).
func ExchangeArguments(args driver.Table) ExchangeOption {
	return exchangeOptionFunc(func(e *driver.Exchange) { e.Args = normalizeArgs(args) })
}

// Exchange adds a durable exchange of the given kind (ExchangeDirect,
// ExchangeTopic, ExchangeFanout, ExchangeHeaders, or a plugin's "x-…" kind).
func (t *Topology) Exchange(name, kind string, opts ...ExchangeOption) *Topology {
	e := driver.Exchange{Name: name, Kind: kind, Durable: true}
	for _, o := range opts {
		o.applyExchange(&e)
	}
	switch {
	case name == "":
		t.fail(errors.New("an exchange needs a name (the default exchange exists already and cannot be declared)"))
		return t
	case strings.HasPrefix(name, "amq."):
		t.fail(fmt.Errorf("the exchange %q cannot be declared: names beginning amq. belong to the broker", name))
		return t
	case kind != driver.Direct && kind != driver.Topic && kind != driver.Fanout && kind != driver.Headers && !strings.HasPrefix(kind, "x-"):
		t.fail(fmt.Errorf("the exchange %q has unknown kind %q (want direct, topic, fanout, headers or a plugin's x-… kind)", name, kind))
		return t
	}
	t.add(Declaration{Kind: DeclareExchange, Exchange: e})
	return t
}

// QueueOption configures a queue declared with Topology.Queue.
type QueueOption interface{ applyQueue(*queueSpec) }

type queueOptionFunc func(*queueSpec)

func (f queueOptionFunc) applyQueue(q *queueSpec) { f(q) }

type queueSpec struct {
	q            driver.Queue
	typ          string // "" (the default), quorum or classic, from an option
	deadLetter   bool
	retry        RetryPolicy
	retryDeclare bool
}

// ClassicQueue declares a classic queue (no x-queue-type argument) instead of
// the quorum default.
func ClassicQueue() QueueOption {
	return queueOptionFunc(func(q *queueSpec) { q.typ = QueueTypeClassic })
}

// QuorumQueue asks for a quorum queue explicitly. Durable queues are quorum
// queues anyway; asking explicitly makes combining it with ExclusiveQueue,
// AutoDeleteQueue or TransientQueue an error instead of a quiet classic
// queue.
func QuorumQueue() QueueOption {
	return queueOptionFunc(func(q *queueSpec) { q.typ = QueueTypeQuorum })
}

// ExclusiveQueue declares an exclusive queue: owned by the declaring
// connection and deleted with it. It is always classic.
func ExclusiveQueue() QueueOption {
	return queueOptionFunc(func(q *queueSpec) { q.q.Exclusive = true })
}

// AutoDeleteQueue declares an auto-delete queue: deleted when its last
// consumer goes. It is always classic.
func AutoDeleteQueue() QueueOption {
	return queueOptionFunc(func(q *queueSpec) { q.q.AutoDelete = true })
}

// TransientQueue declares a non-durable queue: it does not survive a broker
// restart. It is always classic.
func TransientQueue() QueueOption {
	return queueOptionFunc(func(q *queueSpec) { q.q.Durable = false })
}

// QueueArguments sets the queue's arguments. An x-queue-type among them
// overrides the default type ("classic" is written as no argument at all).
func QueueArguments(args driver.Table) QueueOption {
	return queueOptionFunc(func(q *queueSpec) { q.q.Args = normalizeArgs(args) })
}

// WithDeadLettering gives the queue the family's dead-letter half: it adds
// x-dead-letter-exchange=acemq.dlx and x-dead-letter-routing-key={q}.dlq to
// the queue, and declares acemq.dlx, {q}.dlq and {q}.parked with their
// bindings. The broker then dead-letters what the library never sees (TTL
// expiry, length overflow, rejections by other consumers) into {q}.dlq. A
// queue whose arguments already set either dead-letter argument is refused,
// not overruled.
func WithDeadLettering() QueueOption {
	return queueOptionFunc(func(q *queueSpec) { q.deadLetter = true })
}

// Queue adds a queue. By default it is durable and a quorum queue; see
// ClassicQueue, QuorumQueue, ExclusiveQueue, AutoDeleteQueue,
// TransientQueue, QueueArguments, WithDeadLettering and WithRetry (which
// declares the policy's retry rungs and the return binding).
func (t *Topology) Queue(name string, opts ...QueueOption) *Topology {
	spec := queueSpec{q: driver.Queue{Name: name, Durable: true}}
	for _, o := range opts {
		o.applyQueue(&spec)
	}
	if name == "" {
		t.fail(errors.New("a queue needs a name (server-named queues cannot be part of a topology)"))
		return t
	}
	q, err := resolveQueue(spec)
	if err != nil {
		t.fail(err)
		return t
	}
	if spec.deadLetter {
		t.add(exchangeDecl(DeadLetterExchange, driver.Direct))
	}
	if spec.retryDeclare && len(spec.retry.BrokerRungs()) > 0 {
		t.add(exchangeDecl(RetryExchange, driver.Direct))
	}
	t.add(Declaration{Kind: DeclareQueue, Queue: q})
	if spec.deadLetter {
		t.add(classicQueueDecl(DeadLetterQueue(name), nil))
		t.add(classicQueueDecl(ParkedQueue(name), nil))
		t.add(bindingDecl(DeadLetterExchange, DeadLetterQueue(name), DeadLetterQueue(name)))
		t.add(bindingDecl(DeadLetterExchange, ParkedQueue(name), ParkedQueue(name)))
	}
	if spec.retryDeclare {
		rungs := spec.retry.BrokerRungs()
		for _, d := range rungs {
			t.add(classicQueueDecl(RungQueue(name, d), rungArgs(name, d)))
		}
		if len(rungs) > 0 {
			t.add(bindingDecl(RetryExchange, name, name))
		}
	}
	return t
}

// resolveQueue applies the queue-type rules of WIRE.md §5.3 and the
// dead-letter arguments.
func resolveQueue(spec queueSpec) (driver.Queue, error) {
	q := spec.q
	args := maps.Clone(q.Args)
	if args == nil {
		args = driver.Table{}
	}
	name := q.Name
	forcedClassic := q.Exclusive || q.AutoDelete || !q.Durable
	why := func() string {
		var w []string
		if q.Exclusive {
			w = append(w, "exclusive")
		}
		if q.AutoDelete {
			w = append(w, "auto-delete")
		}
		if !q.Durable {
			w = append(w, "transient")
		}
		return strings.Join(w, ", ")
	}

	typ := spec.typ
	if v, ok := args[argQueueType]; ok {
		s, isString := v.(string)
		if !isString || s == "" {
			return q, fmt.Errorf("the queue %q has an x-queue-type argument that is not a queue type name: %v", name, v)
		}
		if typ != "" && typ != s {
			return q, fmt.Errorf("the queue %q asks for a %s queue in its options and a %s queue in its arguments", name, typ, s)
		}
		typ = s
	}
	delete(args, argQueueType)
	switch {
	case typ == QueueTypeClassic:
		// Classic is the argument's absence.
	case typ == "" && forcedClassic:
		// Exclusive, auto-delete and transient queues are classic.
	case typ == "":
		args[argQueueType] = QueueTypeQuorum
	case forcedClassic:
		return q, fmt.Errorf("the queue %q cannot be a %s queue and %s: the broker refuses that; leave the type out (it is then classic) or drop the flag", name, typ, why())
	default:
		args[argQueueType] = typ
	}

	if spec.deadLetter {
		for _, a := range []string{argDeadLetterExchange, argDeadLetterRoutingKey} {
			if _, ok := args[a]; ok {
				return q, fmt.Errorf("the queue %q already sets %s; WithDeadLettering would overrule it: drop the argument or the option", name, a)
			}
		}
		args[argDeadLetterExchange] = DeadLetterExchange
		args[argDeadLetterRoutingKey] = DeadLetterQueue(name)
	}
	q.Args = args
	return q, nil
}

// BindOption configures a binding added with Topology.Bind.
type BindOption interface{ applyBind(*driver.Binding) }

type bindOptionFunc func(*driver.Binding)

func (f bindOptionFunc) applyBind(b *driver.Binding) { f(b) }

// BindingArguments sets the binding's arguments (a headers exchange matches
// on them).
func BindingArguments(args driver.Table) BindOption {
	return bindOptionFunc(func(b *driver.Binding) { b.Args = normalizeArgs(args) })
}

// Bind adds a binding of queue to exchange with routingKey (a pattern for a
// topic exchange). The exchange and the queue may be declared elsewhere in
// the topology or already exist on the broker.
func (t *Topology) Bind(exchange, queue, routingKey string, opts ...BindOption) *Topology {
	b := driver.Binding{Exchange: exchange, Queue: queue, RoutingKey: routingKey}
	for _, o := range opts {
		o.applyBind(&b)
	}
	switch {
	case exchange == "":
		t.fail(fmt.Errorf("the queue %q cannot be bound to the default exchange: it already routes every queue by name", queue))
		return t
	case queue == "":
		t.fail(fmt.Errorf("a binding on the exchange %q needs a queue", exchange))
		return t
	}
	t.add(Declaration{Kind: DeclareBinding, Binding: b})
	return t
}

// Add appends declarations made elsewhere (for example
// ConsumerDeclarations) to the topology.
func (t *Topology) Add(ds ...Declaration) *Topology {
	for _, d := range ds {
		t.add(d)
	}
	return t
}

func (t *Topology) fail(err error) { t.errs = append(t.errs, fmt.Errorf("acemq: topology: %w", err)) }

// add appends d unless an identical declaration is already there; a
// different declaration of the same object is an error.
func (t *Topology) add(d Declaration) {
	k := d.key()
	for _, e := range t.decls {
		if e.key() != k {
			continue
		}
		if !e.same(d) {
			t.fail(fmt.Errorf("%s %q is declared twice with different settings:\n\t%s\n\t%s", d.Kind, d.Name(), e, d))
		}
		return
	}
	t.decls = append(t.decls, d)
}

// Validate reports every mistake made while building the topology, joined,
// or nil.
func (t *Topology) Validate() error {
	return errors.Join(t.errs...)
}

// Plan is the ordered list of declarations a topology makes: exchanges,
// then queues, then bindings.
type Plan []Declaration

// String renders the plan one declaration a line.
func (p Plan) String() string {
	var b strings.Builder
	for _, d := range p {
		b.WriteString(d.String())
		b.WriteByte('\n')
	}
	return b.String()
}

// Plan validates the topology and returns what Apply would declare, in
// order: exchanges, then queues, then bindings, each in the order added.
func (t *Topology) Plan() (Plan, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	var p Plan
	for _, kind := range []DeclarationKind{DeclareExchange, DeclareQueue, DeclareBinding} {
		for _, d := range t.decls {
			if d.Kind == kind {
				p = append(p, d)
			}
		}
	}
	return p, nil
}

// Apply validates the topology and declares it on c's broker, in plan
// order. Declaring is idempotent: what exists with the same settings is left
// alone. Something that exists with different settings fails with an error
// wrapping *driver.PreconditionError; Apply stops at the first failure (what
// was declared before it stays declared).
func (t *Topology) Apply(ctx context.Context, c *Conn) error {
	return t.applyTo(ctx, c.t)
}

func (t *Topology) applyTo(ctx context.Context, tr driver.Conn) error {
	p, err := t.Plan()
	if err != nil {
		return err
	}
	for _, d := range p {
		if err := d.apply(ctx, tr); err != nil {
			return fmt.Errorf("acemq: topology: declaring %s: %w", d, err)
		}
	}
	return nil
}

// Check is one line of a dry run: whether the broker already has what a
// declaration names.
type Check struct {
	Declaration Declaration
	// Checked is false for bindings: AMQP 0-9-1 has no passive binding
	// check, so Apply would declare every binding (which is idempotent).
	Checked bool
	// Exists reports that the exchange or queue is on the broker. It says
	// nothing about its settings: a passive check can only tell existence.
	Exists bool
	// Err is a failure other than "not found" (for example an exclusive
	// queue owned by another connection).
	Err error
}

// String renders the check as one line: "exists", "would be created",
// "binding, not checked" or the error.
func (c Check) String() string {
	switch {
	case c.Err != nil:
		return fmt.Sprintf("%s: cannot tell: %v", c.Declaration, c.Err)
	case !c.Checked:
		return fmt.Sprintf("%s: would be declared (bindings cannot be checked passively)", c.Declaration)
	case c.Exists:
		return fmt.Sprintf("%s: exists (settings not compared)", c.Declaration)
	}
	return fmt.Sprintf("%s: would be created", c.Declaration)
}

// DryRun validates the topology and checks, with passive declarations that
// create nothing, which of its exchanges and queues the broker already has.
// It does not compare settings (a passive check can only tell existence;
// see Drift with ProbeSettings) and cannot check bindings.
func (t *Topology) DryRun(ctx context.Context, c *Conn) ([]Check, error) {
	p, err := t.Plan()
	if err != nil {
		return nil, err
	}
	out := make([]Check, 0, len(p))
	for _, d := range p {
		ch := Check{Declaration: d}
		var ierr error
		if ch.Checked, ierr = inspect(ctx, c.t, d); ch.Checked {
			ch.Exists, ch.Err = exists(ierr)
		}
		if ch.Err != nil && ctx.Err() != nil {
			return out, ctx.Err()
		}
		out = append(out, ch)
	}
	return out, nil
}

// inspect passively checks d's exchange or queue; checked is false for a
// binding, which cannot be checked.
func inspect(ctx context.Context, t driver.Conn, d Declaration) (checked bool, err error) {
	switch d.Kind {
	case DeclareExchange:
		return true, t.InspectExchange(ctx, d.Exchange.Name)
	case DeclareQueue:
		_, err := t.InspectQueue(ctx, d.Queue.Name)
		return true, err
	}
	return false, nil
}

// exists reads the error of a passive check: nil is there, not found is
// absent, anything else is returned.
func exists(err error) (bool, error) {
	switch {
	case err == nil:
		return true, nil
	case errors.Is(err, driver.ErrNotFound):
		return false, nil
	}
	return false, err
}

// DriftKind says how the broker differs from a topology.
type DriftKind string

// The kinds of drift.
const (
	// DriftMissing: the exchange or queue does not exist.
	DriftMissing DriftKind = "missing"
	// DriftDifferent: it exists with other settings; the broker refused a
	// declaration with the topology's settings (Detail is its text). Only
	// reported with ProbeSettings.
	DriftDifferent DriftKind = "different"
	// DriftUnchecked: it exists but its settings could not be probed (for
	// example, no configure permission, or an exclusive queue of another
	// connection).
	DriftUnchecked DriftKind = "unchecked"
)

// Drift is one difference between a topology and the broker.
type Drift struct {
	Declaration Declaration
	Kind        DriftKind
	Detail      string
}

// String renders the drift as one line: kind, declaration, detail.
func (d Drift) String() string {
	if d.Detail == "" {
		return fmt.Sprintf("%s: %s", d.Kind, d.Declaration)
	}
	return fmt.Sprintf("%s: %s: %s", d.Kind, d.Declaration, d.Detail)
}

// DriftOption configures Topology.Drift.
type DriftOption interface{ applyDrift(*driftConfig) }

type driftConfig struct{ probe bool }

type driftOptionFunc func(*driftConfig)

func (f driftOptionFunc) applyDrift(c *driftConfig) { f(c) }

// ProbeSettings makes Drift also look for exchanges and queues that exist
// with different settings, by repeating the topology's own declaration of
// each one the passive check found: the broker accepts that as a no-op when
// the settings are equivalent and refuses it with PRECONDITION_FAILED
// (reported as DriftDifferent) when they are not. It is not passive: it needs
// configure permission (without it the entry is DriftUnchecked), and a
// connection that recovers from a lost link redeclares what it declared,
// probes included.
func ProbeSettings() DriftOption {
	return driftOptionFunc(func(c *driftConfig) { c.probe = true })
}

// Drift reports how the broker differs from the topology.
//
// By default it uses passive checks only, which create nothing and can only
// tell existence: the result lists the exchanges and queues that are missing
// (DriftMissing) and those it could not check (DriftUnchecked). Settings
// cannot be read over AMQP 0-9-1, and comparing argument tables would be
// wrong anyway (RabbitMQ 4 reports an x-queue-type on every queue, including
// ones declared without it); with ProbeSettings the broker itself judges
// equivalence. Bindings are never checked: AMQP 0-9-1 has no way to ask for
// one.
//
// An empty result means every exchange and queue exists (and, with
// ProbeSettings, has equivalent settings).
func (t *Topology) Drift(ctx context.Context, c *Conn, opts ...DriftOption) ([]Drift, error) {
	var cfg driftConfig
	for _, o := range opts {
		o.applyDrift(&cfg)
	}
	p, err := t.Plan()
	if err != nil {
		return nil, err
	}
	var out []Drift
	for _, d := range p {
		checked, ierr := inspect(ctx, c.t, d)
		if !checked {
			continue
		}
		ok, err := exists(ierr)
		switch {
		case err != nil && ctx.Err() != nil:
			return out, ctx.Err()
		case err != nil:
			out = append(out, Drift{Declaration: d, Kind: DriftUnchecked, Detail: err.Error()})
			continue
		case !ok:
			out = append(out, Drift{Declaration: d, Kind: DriftMissing})
			continue
		case !cfg.probe:
			continue
		}
		err = d.apply(ctx, c.t)
		var pe *driver.PreconditionError
		switch {
		case err == nil:
		case errors.As(err, &pe):
			out = append(out, Drift{Declaration: d, Kind: DriftDifferent, Detail: pe.Detail})
		case ctx.Err() != nil:
			return out, ctx.Err()
		default:
			out = append(out, Drift{Declaration: d, Kind: DriftUnchecked, Detail: err.Error()})
		}
	}
	return out, nil
}

// WithTopology applies t (Topology.Apply) when the consumer starts, before
// the consumer's own declarations, so that one call declares the
// application's queue and consumes it. It cannot be combined with
// NoDeclare.
func WithTopology(t *Topology) ConsumeOption {
	return consumeOptionFunc(func(c *consumeConfig) { c.topology = append(c.topology, t) })
}

// normalizeArgs copies args, turning Go int and uint values (which have no
// AMQP width) into int64.
func normalizeArgs(args driver.Table) driver.Table {
	if args == nil {
		return nil
	}
	out := make(driver.Table, len(args))
	for k, v := range args {
		switch n := v.(type) {
		case int:
			v = int64(n)
		case uint:
			v = int64(n)
		}
		out[k] = v
	}
	return out
}
