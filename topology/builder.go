package topology

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/declare"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/wire"
)

// Topology is the application's broker topology written in code: exchanges,
// queues, bindings, and the dead-letter and retry halves of its queues. Build
// one with New and the chained methods, then Validate it, print its Plan,
// Apply it, ask for its Drift, or Delete it:
//
//	topo := topology.New().
//		Exchange("orders", topology.ExchangeTopic).
//		Queue("orders.new", topology.WithDeadLettering(true)).
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
	handle // found by declare.RetriesOf: package acemq's consumers read policies through it
	decls  []declaration
	errs   []error
	// policies are the retry policies queues are declared with
	// (acemq.WithRetry), which their consumers take or must agree with.
	policies declare.Retries
}

// handle is embedded in Topology, unexported: declare.RetriesOf finds the
// topology's retry policies through it, and applications see nothing of it.
type handle = declare.Handle

// New returns an empty topology.
func New() *Topology {
	t := &Topology{}
	t.handle = declare.NewHandle(&t.policies)
	return t
}

// Conn is the connection a topology is applied on, deleted from or
// checked against: an *acemq.Conn, whose Raw lends its driver connection.
type Conn interface {
	Raw(func(driver.Conn) error) error
}

// Exchange adds a durable exchange of the given kind (ExchangeDirect,
// ExchangeTopic, ExchangeFanout, ExchangeHeaders, or a plugin's "x-…"
// kind). WithDurable, WithAutoDelete, WithInternal and WithArguments apply
// to exchanges.
func (t *Topology) Exchange(name string, kind ExchangeKind, opts ...Option) *Topology {
	s := t.spec(opts)
	e := driver.Exchange{Name: name, Kind: string(kind), Durable: !s.Transient, AutoDelete: s.AutoDelete, Internal: s.Internal, Args: s.Args}
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
	if t.misplaced("the exchange "+strconv.Quote(name), "WithExclusive", s.Exclusive, "WithQueueType", s.QueueType != "",
		"WithDeadLettering", s.DeadLetterSet, "WithRetry", s.Retry != nil, "WithMaxPriority", s.MaxPrioSet, "WithMaxAge", s.MaxAge != 0,
		"WithMaxLengthBytes", s.MaxBytes != 0, "WithMaxSegmentSizeBytes", s.SegmentBytes != 0,
		"WithSingleActiveConsumer", s.SingleActive, "WithInitialGroupSize", s.GroupSizeSet) {
		return t
	}
	t.add(declaration{Declaration: Declaration{Kind: ExchangeDeclaration, Exchange: e}})
	return t
}

// Queue adds a queue. By default it is durable and a quorum queue; see
// WithQueueType, WithExclusive, WithAutoDelete, WithDurable, WithArguments,
// WithDeadLettering and acemq.WithRetry (which declares the policy's retry
// rungs and the return binding).
func (t *Topology) Queue(name string, opts ...Option) *Topology {
	s := t.spec(opts)
	if name == "" {
		t.fail(errors.New("a queue needs a name (server-named queues cannot be part of a topology)"))
		return t
	}
	if t.misplaced("the queue "+strconv.Quote(name), "WithInternal", s.Internal) {
		return t
	}
	if s.Transient && !s.Exclusive {
		// RabbitMQ 4 deprecates them (transient_nonexcl_queues) and a
		// broker that denies the feature closes the connection for one.
		t.fail(fmt.Errorf("the queue %q would be transient and not exclusive, which RabbitMQ 4 deprecates and refuses where the deprecated feature is denied (541 INTERNAL_ERROR, transient_nonexcl_queues): add WithExclusive, or drop WithDurable(false) (with WithAutoDelete, a durable queue still goes with its last consumer)", name))
		return t
	}
	if r := s.Retry; r != nil {
		if r.Err != nil {
			t.fail(fmt.Errorf("the queue %q: %w", name, r.Err))
			return t
		}
		if prev, ok := t.policies.Lookup(name); ok && prev.Policy != r.Policy {
			t.fail(fmt.Errorf("the queue %q is declared with two retry policies, %s and %s: give it one", name, prev.Policy, r.Policy))
			return t
		}
	}
	args, err := withMaxPriority(name, s)
	if err != nil {
		t.fail(err)
		return t
	}
	q, err := resolveQueue(driver.Queue{Name: name, Durable: !s.Transient, Exclusive: s.Exclusive, AutoDelete: s.AutoDelete, Args: args}, QueueType(s.QueueType))
	defaulted := false
	if err == nil {
		s.DeadLetter, defaulted = deadLetterDefault(q, s)
		if s.DeadLetter {
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
	var rungs []time.Duration
	if r := s.Retry; r != nil {
		rungs = r.Rungs
		if t.handle == (handle{}) {
			t.handle = declare.NewHandle(&t.policies) // a Topology made without New
		}
		t.policies.Set(name, *r)
	}
	t.add(declaration{Declaration: Declaration{Kind: QueueDeclaration, Queue: q}, defaultDeadLetter: defaulted})
	if s.DeadLetter {
		declare.DeadLetterHalf(adder{t}, name)
	}
	declare.RetryHalf(adder{t}, name, rungs)
	return t
}

// adder adds a half's declarations to a topology.
type adder struct{ t *Topology }

func (a adder) Exchange(e driver.Exchange) {
	a.t.add(declaration{Declaration: Declaration{Kind: ExchangeDeclaration, Exchange: e}})
}

func (a adder) Queue(q driver.Queue) {
	a.t.add(declaration{Declaration: Declaration{Kind: QueueDeclaration, Queue: q}})
}

func (a adder) Bind(b driver.Binding) {
	a.t.add(declaration{Declaration: Declaration{Kind: BindingDeclaration, Binding: b}})
}

// Bind adds a binding of queue to exchange with routingKey (a pattern for a
// topic exchange). The exchange and the queue may be declared elsewhere in
// the topology or already exist on the broker. WithArguments applies to
// bindings (a headers exchange matches on them).
func (t *Topology) Bind(exchange, queue, routingKey string, opts ...Option) *Topology {
	s := t.spec(opts)
	b := driver.Binding{Exchange: exchange, Queue: queue, RoutingKey: routingKey, Args: s.Args}
	switch {
	case exchange == "":
		t.fail(fmt.Errorf("the queue %q cannot be bound to the default exchange: it already routes every queue by name", queue))
		return t
	case queue == "":
		t.fail(fmt.Errorf("a binding on the exchange %q needs a queue", exchange))
		return t
	}
	if t.misplaced(fmt.Sprintf("the binding of %q to %q", queue, exchange), "WithDurable", s.Transient, "WithAutoDelete", s.AutoDelete,
		"WithExclusive", s.Exclusive, "WithInternal", s.Internal, "WithQueueType", s.QueueType != "",
		"WithDeadLettering", s.DeadLetterSet, "WithRetry", s.Retry != nil, "WithMaxPriority", s.MaxPrioSet, "WithMaxAge", s.MaxAge != 0,
		"WithMaxLengthBytes", s.MaxBytes != 0, "WithMaxSegmentSizeBytes", s.SegmentBytes != 0,
		"WithSingleActiveConsumer", s.SingleActive, "WithInitialGroupSize", s.GroupSizeSet) {
		return t
	}
	t.add(declaration{Declaration: Declaration{Kind: BindingDeclaration, Binding: b}})
	return t
}

// spec collects opts and validates them: the one place a declaration's
// options are checked before the method that took them applies its rules.
func (t *Topology) spec(opts []Option) declare.Spec {
	s := declare.Collect(opts)
	if s.ArgsErr != nil {
		t.fail(fmt.Errorf("WithArguments: %w", s.ArgsErr))
	}
	return s
}

// misplaced records an error for every option given where it does not
// apply; pairs is an option's name followed by whether it was given.
func (t *Topology) misplaced(what string, pairs ...any) bool {
	bad := false
	for i := 0; i+1 < len(pairs); i += 2 {
		if given, _ := pairs[i+1].(bool); given {
			t.fail(fmt.Errorf("%s: %s does not apply to it; drop the option", what, pairs[i]))
			bad = true
		}
	}
	return bad
}

func (t *Topology) fail(err error) { t.errs = append(t.errs, fmt.Errorf("topology: %w", err)) }

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
func (t *Topology) Plan() (Plan, error) {
	p, err := t.plan()
	if err != nil {
		return nil, err
	}
	out := make(Plan, len(p))
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
	for _, kind := range []DeclarationKind{ExchangeDeclaration, QueueDeclaration, BindingDeclaration} {
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
// it as it is, without them, and logs a warning through the connection's
// logger (acemq.WithLogger), since a message over its delivery limit is
// then dropped (docs/upgrading.md).
func (t *Topology) Apply(ctx context.Context, c Conn) error {
	p, err := t.plan()
	if err != nil {
		return err
	}
	eng := engine.Of(c)
	err = c.Raw(func(dc driver.Conn) error {
		for _, d := range p {
			err := d.Declare(ctx, dc)
			if err != nil && d.defaultDeadLetter && deadLetterMismatch(err) {
				err = declareWithoutDeadLetter(ctx, dc, logger(eng), d)
			}
			if err != nil {
				return fmt.Errorf("topology: declaring %s: %w", d, err)
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if eng != nil {
		eng.Declared().Remember(&t.policies)
	}
	return nil
}

// logger is the connection's logger, or one that discards.
func logger(eng *engine.Conn) *slog.Logger {
	if eng == nil {
		return slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	return eng.Logger()
}

// Delete deletes the topology's queues, then its exchanges, from c's
// broker, each in the reverse of plan order; bindings go with them. What
// does not exist is skipped. The library's shared exchanges, acemq.dlx and
// acemq.retry, are never deleted: the dead-letter halves of other queues
// use them. Deleting a queue deletes its messages: Delete is for tests,
// demos and tearing down what a tool set up. It needs a driver that can
// delete (driver.Deleter) and stops at the first failure.
func (t *Topology) Delete(ctx context.Context, c Conn) error {
	p, err := t.Plan()
	if err != nil {
		return err
	}
	err = c.Raw(func(dc driver.Conn) error {
		del, ok := dc.(driver.Deleter)
		if !ok {
			return fmt.Errorf("topology: the driver of %s cannot delete queues or exchanges: %w", c, errors.ErrUnsupported)
		}
		for _, kind := range []DeclarationKind{QueueDeclaration, ExchangeDeclaration} {
			for i := len(p) - 1; i >= 0; i-- {
				d := p[i]
				var err error
				switch {
				case d.Kind != kind:
					continue
				case kind == QueueDeclaration:
					_, err = del.DeleteQueue(ctx, d.Queue.Name)
				case d.Exchange.Name == wire.DeadLetterExchange || d.Exchange.Name == wire.RetryExchange:
					continue
				default:
					err = del.DeleteExchange(ctx, d.Exchange.Name)
				}
				if err != nil && !errors.Is(err, driver.ErrNotFound) {
					return fmt.Errorf("topology: deleting the %s %q: %w", d.Kind, d.Name(), err)
				}
			}
		}
		return nil
	})
	if err != nil {
		return err
	}
	if eng := engine.Of(c); eng != nil {
		eng.Declared().Forget(&t.policies)
	}
	return nil
}

// Drift reports how the broker differs from the topology, without changing
// anything (unless WithSettingsProbe).
//
// By default it uses passive checks only, which create nothing and can only
// tell existence: the result lists the exchanges and queues that are
// missing (DriftMissing: what Apply would create) and those it could not
// check (DriftUnchecked). Settings cannot be read over AMQP 0-9-1, and
// comparing argument tables would be wrong anyway (RabbitMQ 4 reports an
// x-queue-type on every queue, including ones declared without it); with
// WithSettingsProbe the broker itself judges equivalence. Bindings are
// never checked: AMQP 0-9-1 has no way to ask for one, and Apply declares
// them all (which is idempotent).
//
// An empty result means every exchange and queue exists (and, with
// WithSettingsProbe, has equivalent settings). It needs a driver with
// passive checks (driver.Inspector).
func (t *Topology) Drift(ctx context.Context, c Conn, opts ...DriftOption) ([]Drift, error) {
	p, err := t.Plan()
	if err != nil {
		return nil, err
	}
	var out []Drift
	err = c.Raw(func(dc driver.Conn) error {
		if _, ok := dc.(driver.Inspector); !ok {
			return fmt.Errorf("topology: the driver of %s cannot check what exists: %w", c, errors.ErrUnsupported)
		}
		var err error
		out, err = Check(ctx, dc, p, opts...)
		return err
	})
	return out, err
}
