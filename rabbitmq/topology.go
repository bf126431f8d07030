package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"slices"
	"strings"
	"sync"

	"github.com/acemq/acemq/driver"
	amqp "github.com/rabbitmq/amqp091-go"
)

// topology records what this connection declared so that recovery can
// declare it again: one entry per exchange, named queue and binding, kept as
// sets keyed by name, so that declaring the same thing again does not grow
// them and deleting it removes it.
type topology struct {
	mu          sync.Mutex
	exchanges   map[string]driver.Exchange
	queues      map[string]driver.Queue
	bindings    map[string]driver.Binding
	serverNamed map[string]struct{} // server-named queues: never redeclared
}

func (t *topology) init() {
	t.exchanges = map[string]driver.Exchange{}
	t.queues = map[string]driver.Queue{}
	t.bindings = map[string]driver.Binding{}
	t.serverNamed = map[string]struct{}{}
}

func bindingKey(b driver.Binding) string {
	var sb strings.Builder
	sb.WriteString(b.Queue)
	sb.WriteByte(0)
	sb.WriteString(b.Exchange)
	sb.WriteByte(0)
	sb.WriteString(b.RoutingKey)
	for _, k := range slices.Sorted(maps.Keys(b.Args)) {
		fmt.Fprintf(&sb, "\x00%s=%#v", k, b.Args[k])
	}
	return sb.String()
}

func (t *topology) addExchange(e driver.Exchange) {
	if e.Name == "" {
		return
	}
	e.Args = maps.Clone(e.Args)
	t.mu.Lock()
	t.exchanges[e.Name] = e
	t.mu.Unlock()
}

func (t *topology) addQueue(q driver.Queue, serverNamed string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if q.Name == "" {
		t.serverNamed[serverNamed] = struct{}{}
		return
	}
	q.Args = maps.Clone(q.Args)
	t.queues[q.Name] = q
}

func (t *topology) addBinding(b driver.Binding) {
	t.mu.Lock()
	defer t.mu.Unlock()
	if _, ok := t.serverNamed[b.Queue]; ok {
		return
	}
	b.Args = maps.Clone(b.Args)
	t.bindings[bindingKey(b)] = b
}

func (t *topology) removeBinding(b driver.Binding) {
	t.mu.Lock()
	delete(t.bindings, bindingKey(b))
	t.mu.Unlock()
}

func (t *topology) removeQueue(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.queues, name)
	delete(t.serverNamed, name)
	for k, b := range t.bindings {
		if b.Queue == name {
			delete(t.bindings, k)
		}
	}
}

func (t *topology) removeExchange(name string) {
	t.mu.Lock()
	defer t.mu.Unlock()
	delete(t.exchanges, name)
	for k, b := range t.bindings {
		if b.Exchange == name {
			delete(t.bindings, k)
		}
	}
}

// sizes reports the number of recorded exchanges, queues and bindings.
func (t *topology) sizes() (int, int, int) {
	t.mu.Lock()
	defer t.mu.Unlock()
	return len(t.exchanges), len(t.queues), len(t.bindings)
}

// redeclare declares the recorded topology on a new connection: exchanges,
// then queues, then bindings. An entity the broker refuses (it was changed
// or deleted meanwhile, say) is skipped; only the loss of the connection
// fails the recovery attempt.
func (t *topology) redeclare(ac *amqp.Connection) error {
	t.mu.Lock()
	exchanges := slices.Collect(maps.Values(t.exchanges))
	queues := slices.Collect(maps.Values(t.queues))
	bindings := slices.Collect(maps.Values(t.bindings))
	t.mu.Unlock()

	var ch *amqp.Channel
	defer func() {
		if ch != nil && !ch.IsClosed() {
			_ = ch.Close()
		}
	}()
	run := func(op func(ch *amqp.Channel) error) error {
		if ch == nil || ch.IsClosed() {
			var err error
			if ch, err = ac.Channel(); err != nil {
				return err
			}
		}
		err := op(ch)
		if err != nil && ac.IsClosed() {
			return err
		}
		return nil
	}
	for _, e := range exchanges {
		if err := run(func(ch *amqp.Channel) error {
			return ch.ExchangeDeclare(e.Name, e.Kind, e.Durable, e.AutoDelete, e.Internal, false, toAMQPTableLax(e.Args))
		}); err != nil {
			return err
		}
	}
	for _, q := range queues {
		if err := run(func(ch *amqp.Channel) error {
			_, err := ch.QueueDeclare(q.Name, q.Durable, q.AutoDelete, q.Exclusive, false, toAMQPTableLax(q.Args))
			return err
		}); err != nil {
			return err
		}
	}
	for _, b := range bindings {
		if err := run(func(ch *amqp.Channel) error {
			return ch.QueueBind(b.Queue, b.RoutingKey, b.Exchange, false, toAMQPTableLax(b.Args))
		}); err != nil {
			return err
		}
	}
	return nil
}

// toAMQPTableLax converts a table already accepted once by the broker.
func toAMQPTableLax(t driver.Table) amqp.Table {
	at, _ := toAMQPTable(t)
	return at
}

// withChannel runs fn on a short-lived channel of a live session, within
// ctx, waiting for recovery if the connection is down. If the connection is
// lost under fn, fn runs again once it is back.
func (c *conn) withChannel(ctx context.Context, fn func(ch *amqp.Channel) error) error {
	for {
		s, err := c.waitSession(ctx, nil)
		if err != nil {
			return err
		}
		err = c.do(ctx, func() error {
			ch, err := s.ac.Channel()
			if err != nil {
				return err
			}
			err = fn(ch)
			if !ch.IsClosed() {
				_ = ch.Close()
			}
			return err
		}, nil)
		if err != nil && connectionLost(s, err) && !c.isClosing() && ctx.Err() == nil {
			continue
		}
		return err
	}
}

// connectionLost reports whether err comes from the loss of s's connection
// rather than from the broker refusing an operation.
func connectionLost(s *session, err error) bool {
	if !s.ac.IsClosed() {
		return false
	}
	var ae *amqp.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case amqp.NotFound, amqp.PreconditionFailed, amqp.AccessRefused, amqp.ResourceLocked:
			return false
		}
	}
	return true
}

// mapErr turns an amqp091 error for an operation on kind name into the
// driver's errors.
func mapErr(op, kind, name string, err error) error {
	if err == nil {
		return nil
	}
	var ae *amqp.Error
	if errors.As(err, &ae) {
		switch ae.Code {
		case amqp.PreconditionFailed:
			return &driver.PreconditionError{Kind: kind, Name: name, Detail: ae.Reason}
		case amqp.NotFound:
			return fmt.Errorf("rabbitmq: %s: the %s %q does not exist (%s): %w", op, kind, name, ae.Reason, driver.ErrNotFound)
		case amqp.AccessRefused, amqp.ResourceLocked:
			return &driver.AccessError{Code: ae.Code, Text: ae.Reason}
		}
	}
	return fmt.Errorf("rabbitmq: %s %s %q: %w", op, kind, name, err)
}

// DeclareExchange declares an exchange and records it for recovery.
func (c *conn) DeclareExchange(ctx context.Context, e driver.Exchange) error {
	args, err := toAMQPTable(e.Args)
	if err != nil {
		return fmt.Errorf("rabbitmq: declare exchange %q: %w", e.Name, err)
	}
	kind := e.Kind
	if kind == "" {
		kind = driver.Direct
	}
	err = c.withChannel(ctx, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclare(e.Name, kind, e.Durable, e.AutoDelete, e.Internal, false, args)
	})
	if err != nil {
		return mapErr("declare", "exchange", e.Name, err)
	}
	e.Kind = kind
	c.topo.addExchange(e)
	c.exchanges.Store(e.Name, struct{}{})
	return nil
}

// DeclareQueue declares a queue and, when it is named, records it for
// recovery. An empty name asks the broker for a server-named queue, whose
// name is returned; such queues are not redeclared after a reconnection.
func (c *conn) DeclareQueue(ctx context.Context, q driver.Queue) (driver.QueueInfo, error) {
	args, err := toAMQPTable(q.Args)
	if err != nil {
		return driver.QueueInfo{}, fmt.Errorf("rabbitmq: declare queue %q: %w", q.Name, err)
	}
	var info amqp.Queue
	err = c.withChannel(ctx, func(ch *amqp.Channel) error {
		var err error
		info, err = ch.QueueDeclare(q.Name, q.Durable, q.AutoDelete, q.Exclusive, false, args)
		return err
	})
	if err != nil {
		return driver.QueueInfo{}, mapErr("declare", "queue", q.Name, err)
	}
	c.topo.addQueue(q, info.Name)
	return driver.QueueInfo{Name: info.Name, Messages: info.Messages, Consumers: info.Consumers}, nil
}

// Bind binds a queue to an exchange and records the binding for recovery.
func (c *conn) Bind(ctx context.Context, b driver.Binding) error {
	args, err := toAMQPTable(b.Args)
	if err != nil {
		return fmt.Errorf("rabbitmq: bind queue %q: %w", b.Queue, err)
	}
	err = c.withChannel(ctx, func(ch *amqp.Channel) error {
		return ch.QueueBind(b.Queue, b.RoutingKey, b.Exchange, false, args)
	})
	if err != nil {
		return mapBindErr("bind", b, err)
	}
	c.topo.addBinding(b)
	return nil
}

func mapBindErr(op string, b driver.Binding, err error) error {
	var ae *amqp.Error
	if errors.As(err, &ae) && ae.Code == amqp.NotFound {
		kind, name := "queue", b.Queue
		if strings.Contains(ae.Reason, "no exchange") {
			kind, name = "exchange", b.Exchange
		}
		return mapErr(op, kind, name, err)
	}
	return mapErr(op, "queue", b.Queue, err)
}

// Unbind removes a binding and forgets it.
func (c *conn) Unbind(ctx context.Context, b driver.Binding) error {
	args, err := toAMQPTable(b.Args)
	if err != nil {
		return fmt.Errorf("rabbitmq: unbind queue %q: %w", b.Queue, err)
	}
	err = c.withChannel(ctx, func(ch *amqp.Channel) error {
		return ch.QueueUnbind(b.Queue, b.RoutingKey, b.Exchange, args)
	})
	if err != nil {
		return mapBindErr("unbind", b, err)
	}
	c.topo.removeBinding(b)
	return nil
}

// DeleteQueue deletes a queue, forgets it and its bindings, and returns the
// number of messages it held.
func (c *conn) DeleteQueue(ctx context.Context, name string) (int, error) {
	var n int
	err := c.withChannel(ctx, func(ch *amqp.Channel) error {
		var err error
		n, err = ch.QueueDelete(name, false, false, false)
		return err
	})
	if err != nil {
		return 0, mapErr("delete", "queue", name, err)
	}
	c.topo.removeQueue(name)
	return n, nil
}

// DeleteExchange deletes an exchange and forgets it and its bindings.
func (c *conn) DeleteExchange(ctx context.Context, name string) error {
	err := c.withChannel(ctx, func(ch *amqp.Channel) error {
		return ch.ExchangeDelete(name, false, false)
	})
	if err != nil {
		return mapErr("delete", "exchange", name, err)
	}
	c.topo.removeExchange(name)
	c.exchanges.Delete(name)
	return nil
}

// InspectQueue is a passive declaration of a queue.
func (c *conn) InspectQueue(ctx context.Context, name string) (driver.QueueInfo, error) {
	var info amqp.Queue
	err := c.withChannel(ctx, func(ch *amqp.Channel) error {
		var err error
		info, err = ch.QueueDeclarePassive(name, false, false, false, false, nil)
		return err
	})
	if err != nil {
		return driver.QueueInfo{}, mapErr("inspect", "queue", name, err)
	}
	return driver.QueueInfo{Name: info.Name, Messages: info.Messages, Consumers: info.Consumers}, nil
}

// InspectExchange is a passive declaration of an exchange.
func (c *conn) InspectExchange(ctx context.Context, name string) error {
	err := c.withChannel(ctx, func(ch *amqp.Channel) error {
		return ch.ExchangeDeclarePassive(name, driver.Direct, false, false, false, false, nil)
	})
	if err != nil {
		return mapErr("inspect", "exchange", name, err)
	}
	c.exchanges.Store(name, struct{}{})
	return nil
}

func (t *topology) hasQueue(name string) bool {
	t.mu.Lock()
	defer t.mu.Unlock()
	_, ok := t.queues[name]
	return ok
}

// redeclareQueue declares the recorded queue name and its bindings again,
// for a subscription that finds its queue missing after a reconnection
// (an exclusive queue the broker had not yet removed with the old
// connection when the topology was redeclared).
func (t *topology) redeclareQueue(ac *amqp.Connection, name string) error {
	t.mu.Lock()
	q, ok := t.queues[name]
	var bindings []driver.Binding
	for _, b := range t.bindings {
		if b.Queue == name {
			bindings = append(bindings, b)
		}
	}
	t.mu.Unlock()
	if !ok {
		return nil
	}
	ch, err := ac.Channel()
	if err != nil {
		return err
	}
	defer func() {
		if !ch.IsClosed() {
			_ = ch.Close()
		}
	}()
	if _, err := ch.QueueDeclare(q.Name, q.Durable, q.AutoDelete, q.Exclusive, false, toAMQPTableLax(q.Args)); err != nil {
		return err
	}
	for _, b := range bindings {
		if err := ch.QueueBind(b.Queue, b.RoutingKey, b.Exchange, false, toAMQPTableLax(b.Args)); err != nil {
			return err
		}
	}
	return nil
}
