package acemq

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"strings"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/topology"
)

// ExchangeKind is an exchange's type, given to Topology.Exchange: one of
// the four below or a plugin's kind, whose name begins "x-"
// (ExchangeKind("x-consistent-hash")).
type ExchangeKind string

// The exchange kinds AMQP 0-9-1 defines.
const (
	ExchangeDirect  ExchangeKind = driver.Direct
	ExchangeTopic   ExchangeKind = driver.Topic
	ExchangeFanout  ExchangeKind = driver.Fanout
	ExchangeHeaders ExchangeKind = driver.Headers
)

// Topology is the application's broker topology written in code: exchanges,
// queues, bindings, and the dead-letter and retry halves of its queues. Build
// one with NewTopology and the chained methods, then Validate it, print its
// Plan, Apply it, ask for its Drift, or Delete it:
//
//	topo := acemq.NewTopology().
//		Exchange("orders", acemq.ExchangeTopic).
//		Queue("orders.new", acemq.WithDeadLettering(true)).
//		Bind("orders", "orders.new", "order.*")
//
// Defaults follow the family's contract (docs/wire.md §5): exchanges and
// queues are durable, durable queues are quorum queues, exclusive,
// auto-delete and transient queues are classic. The queue type is decided
// there and nowhere else: every queue the library and its packages declare
// goes through a Topology. Mistakes (an explicit quorum queue that is
// exclusive, a dead-lettering queue that already sets a dead-letter argument,
// the same queue declared twice with different settings) are collected while
// building and reported by Validate, Plan and Apply; nothing is sent to the
// broker until Apply.
//
// The builder methods change t and return it; build a Topology on one
// goroutine. Once built, its methods that talk to a broker may be called
// from many.
type Topology struct {
	decls []declaration
	errs  []error
	// policies are the retry policies queues are declared with
	// (WithRetry), which their consumers take or must agree with.
	policies map[string]RetryPolicy
}

// NewTopology returns an empty topology.
func NewTopology() *Topology { return &Topology{} }

// Exchange adds a durable exchange of the given kind (ExchangeDirect,
// ExchangeTopic, ExchangeFanout, ExchangeHeaders, or a plugin's "x-…"
// kind). WithDurable, WithAutoDelete, WithInternal and WithArguments apply
// to exchanges.
func (t *Topology) Exchange(name string, kind ExchangeKind, opts ...DeclareOption) *Topology {
	s := t.spec(opts)
	e := driver.Exchange{Name: name, Kind: string(kind), Durable: !s.transient, AutoDelete: s.autoDelete, Internal: s.internal, Args: s.args}
	switch {
	case name == "":
		t.fail(errors.New("an exchange needs a name (the default exchange exists already and cannot be declared)"))
		return t
	case strings.HasPrefix(name, "amq."):
		t.fail(fmt.Errorf("the exchange %q cannot be declared: names beginning amq. belong to the broker", name))
		return t
	case kind != ExchangeDirect && kind != ExchangeTopic && kind != ExchangeFanout && kind != ExchangeHeaders && !strings.HasPrefix(string(kind), "x-"):
		t.fail(fmt.Errorf("the exchange %q has unknown kind %q (want direct, topic, fanout, headers or a plugin's x-… kind)", name, kind))
		return t
	}
	if t.misplaced(s, "the exchange "+strconv.Quote(name), "WithExclusive", s.exclusive, "WithQueueType", s.qtype != "",
		"WithDeadLettering", s.deadLetterSet, "WithRetry", s.retrySet, "WithMaxPriority", s.maxPrioSet, "WithMaxAge", s.maxAge != 0,
		"WithMaxLengthBytes", s.maxBytes != 0, "WithMaxSegmentSizeBytes", s.segmentBytes != 0,
		"WithSingleActiveConsumer", s.singleActive, "WithInitialGroupSize", s.groupSizeSet) {
		return t
	}
	t.add(declaration{Declaration: topology.Declaration{Kind: topology.ExchangeDeclaration, Exchange: e}})
	return t
}

// Queue adds a queue. By default it is durable and a quorum queue; see
// WithQueueType, WithExclusive, WithAutoDelete, WithDurable, WithArguments,
// WithDeadLettering and WithRetry (which declares the policy's retry rungs
// and the return binding).
func (t *Topology) Queue(name string, opts ...DeclareOption) *Topology {
	s := t.spec(opts)
	if name == "" {
		t.fail(errors.New("a queue needs a name (server-named queues cannot be part of a topology)"))
		return t
	}
	if t.misplaced(s, "the queue "+strconv.Quote(name), "WithInternal", s.internal) {
		return t
	}
	if s.transient && !s.exclusive {
		// RabbitMQ 4 deprecates them (transient_nonexcl_queues) and a
		// broker that denies the feature closes the connection for one.
		t.fail(fmt.Errorf("the queue %q would be transient and not exclusive, which RabbitMQ 4 deprecates and refuses where the deprecated feature is denied (541 INTERNAL_ERROR, transient_nonexcl_queues): add WithExclusive, or drop WithDurable(false) (with WithAutoDelete, a durable queue still goes with its last consumer)", name))
		return t
	}
	if s.retrySet {
		if s.retry.err != nil {
			t.fail(fmt.Errorf("the queue %q: %w", name, s.retry.err))
			return t
		}
		s.retry = s.retry.orDefault()
		if prev, ok := t.policies[name]; ok && prev != s.retry {
			t.fail(fmt.Errorf("the queue %q is declared with two retry policies, %s and %s: give it one", name, prev, s.retry))
			return t
		}
	}
	args, err := withMaxPriority(name, s)
	if err != nil {
		t.fail(err)
		return t
	}
	q, err := resolveQueue(driver.Queue{Name: name, Durable: !s.transient, Exclusive: s.exclusive, AutoDelete: s.autoDelete, Args: args}, s.qtype)
	defaulted := false
	if err == nil {
		s.deadLetter, defaulted = deadLetterDefault(q, s)
		if s.deadLetter {
			q, err = withDeadLetterArgs(q)
		}
	}
	if err == nil {
		err = priorityNeedsClassic(q, s)
	}
	if err == nil {
		q, err = queueLimits(q, s)
	}
	if err == nil {
		q, err = applyGroupSize(q, s)
	}
	if err != nil {
		t.fail(err)
		return t
	}
	rungs := s.retry.brokerRungs()
	if !s.retrySet {
		rungs = nil
	} else {
		if t.policies == nil {
			t.policies = make(map[string]RetryPolicy)
		}
		t.policies[name] = s.retry
	}
	if s.deadLetter {
		t.add(exchangeDecl(wire.DeadLetterExchange, driver.Direct))
	}
	if len(rungs) > 0 {
		t.add(exchangeDecl(wire.RetryExchange, driver.Direct))
	}
	t.add(declaration{Declaration: topology.Declaration{Kind: topology.QueueDeclaration, Queue: q}, defaultDeadLetter: defaulted})
	if s.deadLetter {
		t.add(classicQueueDecl(wire.DeadLetterQueue(name), nil))
		t.add(classicQueueDecl(wire.ParkedQueue(name), nil))
		t.add(bindingDecl(wire.DeadLetterExchange, wire.DeadLetterQueue(name), wire.DeadLetterQueue(name)))
		t.add(bindingDecl(wire.DeadLetterExchange, wire.ParkedQueue(name), wire.ParkedQueue(name)))
	}
	for _, d := range rungs {
		t.add(classicQueueDecl(wire.RungQueue(name, d), rungArgs(name, d)))
	}
	if len(rungs) > 0 {
		t.add(bindingDecl(wire.RetryExchange, name, name))
	}
	return t
}

// Bind adds a binding of queue to exchange with routingKey (a pattern for a
// topic exchange). The exchange and the queue may be declared elsewhere in
// the topology or already exist on the broker. WithArguments applies to
// bindings (a headers exchange matches on them).
func (t *Topology) Bind(exchange, queue, routingKey string, opts ...DeclareOption) *Topology {
	s := t.spec(opts)
	b := driver.Binding{Exchange: exchange, Queue: queue, RoutingKey: routingKey, Args: s.args}
	switch {
	case exchange == "":
		t.fail(fmt.Errorf("the queue %q cannot be bound to the default exchange: it already routes every queue by name", queue))
		return t
	case queue == "":
		t.fail(fmt.Errorf("a binding on the exchange %q needs a queue", exchange))
		return t
	}
	if t.misplaced(s, fmt.Sprintf("the binding of %q to %q", queue, exchange), "WithDurable", s.transient, "WithAutoDelete", s.autoDelete,
		"WithExclusive", s.exclusive, "WithInternal", s.internal, "WithQueueType", s.qtype != "",
		"WithDeadLettering", s.deadLetterSet, "WithRetry", s.retrySet, "WithMaxPriority", s.maxPrioSet, "WithMaxAge", s.maxAge != 0,
		"WithMaxLengthBytes", s.maxBytes != 0, "WithMaxSegmentSizeBytes", s.segmentBytes != 0,
		"WithSingleActiveConsumer", s.singleActive, "WithInitialGroupSize", s.groupSizeSet) {
		return t
	}
	t.add(declaration{Declaration: topology.Declaration{Kind: topology.BindingDeclaration, Binding: b}})
	return t
}

func (t *Topology) spec(opts []DeclareOption) declareSpec {
	var s declareSpec
	for _, o := range opts {
		if o != nil {
			o.applyDeclare(&s)
		}
	}
	if s.argsErr != nil {
		t.fail(fmt.Errorf("WithArguments: %w", s.argsErr))
	}
	return s
}

// misplaced records an error for every option given where it does not
// apply; pairs is an option's name followed by whether it was given.
func (t *Topology) misplaced(s declareSpec, what string, pairs ...any) bool {
	bad := false
	for i := 0; i+1 < len(pairs); i += 2 {
		if given, _ := pairs[i+1].(bool); given {
			t.fail(fmt.Errorf("%s: %s does not apply to it; drop the option", what, pairs[i]))
			bad = true
		}
	}
	return bad
}

func (t *Topology) fail(err error) { t.errs = append(t.errs, fmt.Errorf("acemq: topology: %w", err)) }

// add appends d unless an identical declaration is already there; a
// different declaration of the same object is an error.
func (t *Topology) add(d declaration) {
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

// Plan validates the topology and returns what Apply would declare, in
// order: exchanges, then queues, then bindings, each in the order added.
func (t *Topology) Plan() (topology.Plan, error) {
	p, err := t.plan()
	if err != nil {
		return nil, err
	}
	out := make(topology.Plan, len(p))
	for i, d := range p {
		out[i] = d.Declaration
	}
	return out, nil
}

// plan is Plan with what Apply needs to know of each declaration.
func (t *Topology) plan() ([]declaration, error) {
	if err := t.Validate(); err != nil {
		return nil, err
	}
	var p []declaration
	for _, kind := range []topology.DeclarationKind{topology.ExchangeDeclaration, topology.QueueDeclaration, topology.BindingDeclaration} {
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
// was declared before it stays declared). The one difference it tolerates
// is a quorum queue that exists without the dead-letter arguments it would
// have by default (declared before quorum queues had them): Apply declares
// it as it is, without them, and logs a warning, since a message over its
// delivery limit is then dropped (docs/upgrading.md).
func (t *Topology) Apply(ctx context.Context, c *Conn) error {
	p, err := t.plan()
	if err != nil {
		return err
	}
	for _, d := range p {
		err := d.apply(ctx, c.t)
		if err != nil && d.defaultDeadLetter && deadLetterMismatch(err) {
			err = declareWithoutDeadLetter(ctx, c, d)
		}
		if err != nil {
			return fmt.Errorf("acemq: topology: declaring %s: %w", d, err)
		}
	}
	c.declared.remember(t.policies)
	return nil
}

// Delete deletes the topology's queues, then its exchanges, from c's
// broker, each in the reverse of plan order; bindings go with them. What
// does not exist is skipped. The library's shared exchanges, acemq.dlx and
// acemq.retry, are never deleted: the dead-letter halves of other queues
// use them. Deleting a queue deletes its messages: Delete is for tests,
// demos and tearing down what a tool set up. It needs a driver that can
// delete (driver.Deleter) and stops at the first failure.
func (t *Topology) Delete(ctx context.Context, c *Conn) error {
	p, err := t.Plan()
	if err != nil {
		return err
	}
	del, ok := c.t.(driver.Deleter)
	if !ok {
		return fmt.Errorf("acemq: topology: the driver of %s cannot delete queues or exchanges: %w", c, ErrUnsupported)
	}
	for _, kind := range []topology.DeclarationKind{topology.QueueDeclaration, topology.ExchangeDeclaration} {
		for i := len(p) - 1; i >= 0; i-- {
			d := p[i]
			var err error
			switch {
			case d.Kind != kind:
				continue
			case kind == topology.QueueDeclaration:
				_, err = del.DeleteQueue(ctx, d.Queue.Name)
			case d.Exchange.Name == wire.DeadLetterExchange || d.Exchange.Name == wire.RetryExchange:
				continue
			default:
				err = del.DeleteExchange(ctx, d.Exchange.Name)
			}
			if err != nil && !errors.Is(err, ErrNotFound) {
				return fmt.Errorf("acemq: topology: deleting the %s %q: %w", d.Kind, d.Name(), err)
			}
		}
	}
	c.declared.forget(t.policies)
	return nil
}
