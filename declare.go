package acemq

import (
	"context"
	"fmt"
	"time"

	"github.com/acemq/acemq/driver"
)

// DeclarationKind says what a Declaration declares.
type DeclarationKind string

// The kinds of declaration.
const (
	DeclareExchange DeclarationKind = "exchange"
	DeclareQueue    DeclarationKind = "queue"
	DeclareBinding  DeclarationKind = "binding"
)

// Declaration is one exchange, queue or binding to declare on the broker.
// Exactly one of Exchange, Queue and Binding is meaningful, as Kind says.
type Declaration struct {
	Kind     DeclarationKind
	Exchange driver.Exchange
	Queue    driver.Queue
	Binding  driver.Binding
}

func (d Declaration) apply(ctx context.Context, t driver.Conn) error {
	switch d.Kind {
	case DeclareExchange:
		return t.DeclareExchange(ctx, d.Exchange)
	case DeclareQueue:
		_, err := t.DeclareQueue(ctx, d.Queue)
		return err
	case DeclareBinding:
		return t.Bind(ctx, d.Binding)
	}
	return fmt.Errorf("acemq: unknown declaration kind %q", d.Kind)
}

// String renders the declaration for a plan.
func (d Declaration) String() string {
	switch d.Kind {
	case DeclareExchange:
		return fmt.Sprintf("exchange %s (%s, durable=%t)", d.Exchange.Name, d.Exchange.Kind, d.Exchange.Durable)
	case DeclareQueue:
		return fmt.Sprintf("queue %s (durable=%t exclusive=%t auto-delete=%t) %v", d.Queue.Name, d.Queue.Durable, d.Queue.Exclusive, d.Queue.AutoDelete, d.Queue.Args)
	case DeclareBinding:
		return fmt.Sprintf("binding %s -> %s on %q", d.Binding.Exchange, d.Binding.Queue, d.Binding.RoutingKey)
	}
	return string(d.Kind)
}

func exchangeDecl(name, kind string) Declaration {
	return Declaration{Kind: DeclareExchange, Exchange: driver.Exchange{Name: name, Kind: kind, Durable: true}}
}

func classicQueueDecl(name string, args driver.Table) Declaration {
	if args == nil {
		args = driver.Table{}
	}
	return Declaration{Kind: DeclareQueue, Queue: driver.Queue{Name: name, Durable: true, Args: args}}
}

func bindingDecl(exchange, queue, key string) Declaration {
	return Declaration{Kind: DeclareBinding, Binding: driver.Binding{Exchange: exchange, Queue: queue, RoutingKey: key}}
}

// rungArgs are exactly the three arguments of a retry rung of q.
func rungArgs(q string, d time.Duration) driver.Table {
	return driver.Table{
		"x-message-ttl":             d.Milliseconds(),
		"x-dead-letter-exchange":    RetryExchange,
		"x-dead-letter-routing-key": q,
	}
}

// consumerDeclarations is what starting a consumer of q with policy p
// declares (WIRE.md §5.4).
func consumerDeclarations(q string, p RetryPolicy) []Declaration {
	out := []Declaration{
		exchangeDecl(DeadLetterExchange, driver.Direct),
		classicQueueDecl(DeadLetterQueue(q), nil),
		classicQueueDecl(ParkedQueue(q), nil),
		bindingDecl(DeadLetterExchange, DeadLetterQueue(q), DeadLetterQueue(q)),
		bindingDecl(DeadLetterExchange, ParkedQueue(q), ParkedQueue(q)),
	}
	rungs := p.BrokerRungs()
	if len(rungs) == 0 {
		return out
	}
	out = append(out, exchangeDecl(RetryExchange, driver.Direct))
	for _, d := range rungs {
		out = append(out, classicQueueDecl(RungQueue(q, d), rungArgs(q, d)))
	}
	return append(out, bindingDecl(RetryExchange, q, q))
}

// ConsumerDeclarations lists what starting a consumer of queue with policy
// p declares, in order, without declaring it.
func ConsumerDeclarations(queue string, p RetryPolicy) []Declaration {
	return consumerDeclarations(queue, p.orDefault())
}
