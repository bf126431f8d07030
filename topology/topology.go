// Package topology is the application's broker topology written in code:
// exchanges, queues, bindings, and the dead-letter and retry halves of its
// queues, as the family names them (docs/wire.md §5). Build a Topology with
// New and its chained methods, and apply it on a connection:
//
//	topo := topology.New().
//		Exchange("orders", topology.ExchangeTopic).
//		Queue("orders.new", topology.WithDeadLettering(true), acemq.WithRetry(policy)).
//		Bind("orders", "orders.new", "order.*")
//	err := topo.Apply(ctx, conn) // or acemq.WithTopology(topo) on Consume
//
// Each exchange, queue and binding takes Options (WithDurable,
// WithQueueType, WithDeadLettering, WithMaxAge, …); acemq.WithRetry is one
// too, and declares a queue's retry rungs. Mistakes are collected while
// building and reported by Validate, Plan and Apply.
//
// The package also serves the tools that show or check a topology rather
// than apply it: a deployment step that prints the plan, a health check
// that reports drift, the acemq CLI's topology commands. Topology.Plan
// returns a Plan, the ordered list of Declarations Apply would make, and
// Topology.Drift the Drift entries that tell where the broker differs:
//
//	plan, err := topo.Plan()
//	fmt.Print(plan)
//	drift, err := topo.Drift(ctx, conn, topology.WithSettingsProbe())
//
// Package acemq imports this package, not the other way round: Apply,
// Delete and Drift take a Conn, which an *acemq.Conn is.
package topology

import (
	"context"
	"fmt"
	"maps"
	"slices"
	"strings"

	"github.com/acemq/acemq/driver"
)

// DeclarationKind says what a Declaration declares.
type DeclarationKind string

// The kinds of declaration.
const (
	ExchangeDeclaration DeclarationKind = "exchange"
	QueueDeclaration    DeclarationKind = "queue"
	BindingDeclaration  DeclarationKind = "binding"
)

// Declaration is one exchange, queue or binding to declare on the broker.
// Exactly one of Exchange, Queue and Binding is meaningful, as Kind says.
type Declaration struct {
	Kind     DeclarationKind
	Exchange driver.Exchange
	Queue    driver.Queue
	Binding  driver.Binding
}

// Declare makes the declaration on the broker behind c. Declaring is
// idempotent: what exists with the same settings is left alone; what
// exists with other settings fails with an error wrapping
// *driver.PreconditionError.
func (d Declaration) Declare(ctx context.Context, c driver.Conn) error {
	switch d.Kind {
	case ExchangeDeclaration:
		return c.DeclareExchange(ctx, d.Exchange)
	case QueueDeclaration:
		_, err := c.DeclareQueue(ctx, d.Queue)
		return err
	case BindingDeclaration:
		return c.Bind(ctx, d.Binding)
	}
	return fmt.Errorf("topology: unknown declaration kind %q", d.Kind)
}

// Name is the exchange's or queue's name, or for a binding
// "exchange -> queue".
func (d Declaration) Name() string {
	switch d.Kind {
	case ExchangeDeclaration:
		return d.Exchange.Name
	case QueueDeclaration:
		return d.Queue.Name
	case BindingDeclaration:
		return d.Binding.Exchange + " -> " + d.Binding.Queue
	}
	return ""
}

// String renders the declaration as one line of a plan, for example
//
//	queue orders.new (quorum, durable) x-dead-letter-exchange=acemq.dlx x-dead-letter-routing-key=orders.new.dlq
func (d Declaration) String() string {
	var b strings.Builder
	switch d.Kind {
	case ExchangeDeclaration:
		e := d.Exchange
		fmt.Fprintf(&b, "exchange %s (%s", e.Name, e.Kind)
		flag(&b, e.Durable, "durable", "transient")
		flag(&b, e.AutoDelete, "auto-delete", "")
		flag(&b, e.Internal, "internal", "")
		b.WriteString(")")
		writeArgs(&b, e.Args)
	case QueueDeclaration:
		q := d.Queue
		fmt.Fprintf(&b, "queue %s (%s", q.Name, queueType(q.Args))
		flag(&b, q.Durable, "durable", "transient")
		flag(&b, q.Exclusive, "exclusive", "")
		flag(&b, q.AutoDelete, "auto-delete", "")
		b.WriteString(")")
		args := maps.Clone(q.Args)
		delete(args, argQueueType)
		writeArgs(&b, args)
	case BindingDeclaration:
		fmt.Fprintf(&b, "binding %s -> %s on %q", d.Binding.Exchange, d.Binding.Queue, d.Binding.RoutingKey)
		writeArgs(&b, d.Binding.Args)
	default:
		b.WriteString(string(d.Kind))
	}
	return b.String()
}

// argQueueType is the argument that selects a queue type.
const argQueueType = "x-queue-type"

func flag(b *strings.Builder, on bool, yes, no string) {
	switch {
	case on && yes != "":
		b.WriteString(", " + yes)
	case !on && no != "":
		b.WriteString(", " + no)
	}
}

func writeArgs(b *strings.Builder, args driver.Table) {
	for _, k := range slices.Sorted(maps.Keys(args)) {
		fmt.Fprintf(b, " %s=%v", k, args[k])
	}
}

// queueType is the queue type a declaration's arguments ask for: the
// x-queue-type argument, or "classic" when there is none.
func queueType(args driver.Table) string {
	if t, ok := args[argQueueType].(string); ok && t != "" {
		return t
	}
	return "classic"
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
