package memory

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
)

// DeclareExchange declares an exchange or checks that an existing one has
// the same settings.
func (c *conn) DeclareExchange(ctx context.Context, e driver.Exchange) error {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	op := "declare exchange " + strconv.Quote(e.Name)
	if err := c.check(ctx, op); err != nil {
		return err
	}
	if e.Name == "" {
		return refusedErr("operation not permitted on the default exchange")
	}
	if strings.HasPrefix(e.Name, "amq.") {
		return refusedErr("exchange name '%s' contains reserved prefix 'amq.*'", e.Name)
	}
	if len(e.Name) > 255 {
		return fmt.Errorf("memory: %s: the name is longer than 255 bytes", op)
	}
	switch e.Kind {
	case driver.Direct, driver.Topic, driver.Fanout, driver.Headers:
	default:
		return fmt.Errorf("memory: %s: 503 COMMAND_INVALID - unknown exchange type '%s'", op, e.Kind)
	}
	if err := validateTable("exchange argument", e.Args); err != nil {
		return err
	}
	if ex, ok := b.exchanges[e.Name]; ok {
		pe := func(detail string) error {
			return &driver.PreconditionError{Kind: "exchange", Name: e.Name, Detail: detail}
		}
		switch {
		case ex.kind != e.Kind:
			return pe(fieldMismatch("type", "exchange", e.Name, e.Kind, ex.kind))
		case ex.durable != e.Durable:
			return pe(fieldMismatch("durable", "exchange", e.Name, e.Durable, ex.durable))
		case ex.autoDelete != e.AutoDelete:
			return pe(fieldMismatch("auto_delete", "exchange", e.Name, e.AutoDelete, ex.autoDelete))
		case ex.internal != e.Internal:
			return pe(fieldMismatch("internal", "exchange", e.Name, e.Internal, ex.internal))
		}
		if d := compareArgs("exchange", e.Name, ex.args, e.Args, nil); d != "" {
			return pe(d)
		}
		return nil
	}
	b.exchanges[e.Name] = &exchange{
		name:       e.Name,
		kind:       e.Kind,
		durable:    e.Durable,
		autoDelete: e.AutoDelete,
		internal:   e.Internal,
		args:       cloneTable(e.Args),
	}
	return nil
}

// queueDefaults are the values absent queue arguments stand for when
// declarations are compared.
var queueDefaults = map[string]any{"x-queue-type": "classic"}

// unimplementedArgs are queue arguments RabbitMQ understands that the
// memory broker does not implement; it refuses them rather than pretend.
var unimplementedArgs = []string{
	"x-expires", "x-max-length", "x-max-length-bytes", "x-overflow",
	"x-single-active-consumer", "x-delivery-limit",
	"x-queue-mode", "x-queue-master-locator", "x-queue-leader-locator",
	"x-max-age", "x-stream-max-segment-size-bytes",
	"x-dead-letter-strategy", "x-queue-version",
}

// DeclareQueue declares a queue or checks that an existing one has the same
// settings.
func (c *conn) DeclareQueue(ctx context.Context, q driver.Queue) (driver.QueueInfo, error) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	op := "declare queue " + strconv.Quote(q.Name)
	if err := c.check(ctx, op); err != nil {
		return driver.QueueInfo{}, err
	}
	name := q.Name
	if name == "" {
		name = randomName("amq.gen-")
	} else if strings.HasPrefix(name, "amq.") {
		return driver.QueueInfo{}, refusedErr("queue name '%s' contains reserved prefix 'amq.*'", name)
	}
	if len(name) > 255 {
		return driver.QueueInfo{}, fmt.Errorf("memory: %s: the name is longer than 255 bytes", op)
	}
	if err := validateTable("queue argument", q.Args); err != nil {
		return driver.QueueInfo{}, err
	}
	parsed, err := parseQueueArgs(name, q)
	if err != nil {
		return driver.QueueInfo{}, err
	}
	if ex, ok := b.queues[name]; ok {
		if ex.exclusive && ex.owner != c || ex.exclusive != q.Exclusive {
			return driver.QueueInfo{}, lockedErr(name)
		}
		pe := func(detail string) error {
			return &driver.PreconditionError{Kind: "queue", Name: name, Detail: detail}
		}
		switch {
		case ex.durable != q.Durable:
			return driver.QueueInfo{}, pe(fieldMismatch("durable", "queue", name, q.Durable, ex.durable))
		case ex.autoDelete != q.AutoDelete:
			return driver.QueueInfo{}, pe(fieldMismatch("auto_delete", "queue", name, q.AutoDelete, ex.autoDelete))
		}
		if d := compareArgs("queue", name, ex.args, q.Args, queueDefaults); d != "" {
			return driver.QueueInfo{}, pe(d)
		}
		b.dispatch(ex)
		return ex.info(), nil
	}
	if !q.Durable && !q.Exclusive {
		// RabbitMQ 4's deprecated feature transient_nonexcl_queues, as a
		// broker that denies it answers (it closes the connection).
		return driver.QueueInfo{}, &driver.AccessError{Code: 541, Text: fmt.Sprintf(
			"INTERNAL_ERROR - Feature `transient_nonexcl_queues` is deprecated. "+
				"Declaring the transient non-exclusive queue '%s' in vhost '/' is refused: "+
				"make it durable or exclusive", name)}
	}
	nq := parsed
	nq.name = name
	nq.durable, nq.exclusive, nq.autoDelete = q.Durable, q.Exclusive, q.AutoDelete
	nq.args = cloneTable(q.Args)
	if q.Exclusive {
		nq.owner = c
	}
	b.queues[name] = nq
	return nq.info(), nil
}

// parseQueueArgs validates a queue's arguments as RabbitMQ does and returns
// a queue carrying the ones the broker implements.
func parseQueueArgs(name string, q driver.Queue) (*queue, error) {
	pe := func(format string, args ...any) error {
		return &driver.PreconditionError{Kind: "queue", Name: name, Detail: fmt.Sprintf(format, args...)}
	}
	invalid := func(arg string, why string) error {
		return pe("invalid arg '%s' for queue '%s' in vhost '/': %s", arg, name, why)
	}
	nq := &queue{}
	qtype := "classic"
	if v, ok := q.Args["x-queue-type"]; ok {
		s, ok := v.(string)
		if !ok {
			return nil, invalid("x-queue-type", fmt.Sprintf("{unacceptable_type,%s}", typeName(v)))
		}
		qtype = s
	}
	for _, a := range unimplementedArgs {
		if _, ok := q.Args[a]; ok && !implementedArg(qtype, a) {
			return nil, fmt.Errorf("memory: declare queue %q: the memory broker does not implement the queue argument %q", name, a)
		}
	}
	if err := parseSingleActive(name, q, nq); err != nil {
		return nil, err
	}
	switch qtype {
	case "classic":
	case "quorum":
		if err := durableOnly(name, q); err != nil {
			return nil, err
		}
		if err := parseDeliveryLimit(nq, q.Args, invalid); err != nil {
			return nil, err
		}
	case "stream":
		l, err := parseStreamArgs(name, q)
		if err != nil {
			return nil, err
		}
		nq.stream = l
		return nq, nil
	default:
		return nil, invalid("x-queue-type", fmt.Sprintf("unknown queue type '%s'", qtype))
	}
	if err := checkGroupSize(q.Args, invalid); err != nil {
		return nil, err
	}
	if v, ok := q.Args["x-message-ttl"]; ok {
		n, isInt := wire.Integer(v)
		switch {
		case !isInt:
			return nil, invalid("x-message-ttl", fmt.Sprintf("{unacceptable_type,%s}", typeName(v)))
		case n < 0:
			return nil, invalid("x-message-ttl", fmt.Sprintf("{value_negative,%d}", n))
		}
		nq.ttl, nq.hasTTL = time.Duration(n)*time.Millisecond, true
	}
	if v, ok := q.Args["x-dead-letter-exchange"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return nil, invalid("x-dead-letter-exchange", fmt.Sprintf("{unacceptable_type,%s}", typeName(v)))
		}
		nq.dlx, nq.hasDLX = s, true
	}
	if v, ok := q.Args["x-dead-letter-routing-key"]; ok {
		s, isStr := v.(string)
		if !isStr {
			return nil, invalid("x-dead-letter-routing-key", fmt.Sprintf("{unacceptable_type,%s}", typeName(v)))
		}
		if !nq.hasDLX {
			return nil, invalid("x-dead-letter-routing-key", "routing_key_but_no_dlx_defined")
		}
		nq.dlrk, nq.hasDLK = s, true
	}
	if err := parseMaxPriority(nq, name, qtype, q.Args, invalid); err != nil {
		return nil, err
	}
	return nq, nil
}

// durableOnly refuses the flags a quorum queue or a stream cannot have.
func durableOnly(name string, q driver.Queue) error {
	pe := func(prop string) error {
		return &driver.PreconditionError{Kind: "queue", Name: name, Detail: fmt.Sprintf("invalid property '%s' for queue '%s' in vhost '/'", prop, name)}
	}
	switch {
	case !q.Durable:
		return pe("non-durable")
	case q.Exclusive:
		return pe("exclusive-owner")
	case q.AutoDelete:
		return pe("auto-delete")
	}
	return nil
}

func (q *queue) info() driver.QueueInfo {
	if q.stream != nil {
		return driver.QueueInfo{Name: q.name, Messages: q.stream.count(), Consumers: len(q.consumers)}
	}
	return driver.QueueInfo{Name: q.name, Messages: len(q.msgs), Consumers: len(q.consumers)}
}

// lookupQueue finds a queue this connection may use.
func (c *conn) lookupQueue(name string) (*queue, error) {
	q, ok := c.b.queues[name]
	if !ok {
		return nil, notFound("queue", name)
	}
	if q.exclusive && q.owner != c {
		return nil, lockedErr(name)
	}
	return q, nil
}

// lookupBindable finds an exchange that may take bindings.
func (c *conn) lookupBindable(name string) (*exchange, error) {
	if name == "" {
		return nil, refusedErr("operation not permitted on the default exchange")
	}
	ex, ok := c.b.exchanges[name]
	if !ok {
		return nil, notFound("exchange", name)
	}
	return ex, nil
}

// Bind binds a queue to an exchange; binding twice is harmless.
func (c *conn) Bind(ctx context.Context, bd driver.Binding) error {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	ex, q, err := c.bindingEnds(ctx, fmt.Sprintf("bind queue %q to exchange %q", bd.Queue, bd.Exchange), bd)
	if err != nil {
		return err
	}
	if err := validateTable("binding argument", bd.Args); err != nil {
		return err
	}
	if ex.kind == driver.Headers {
		if v, ok := bd.Args["x-match"]; ok {
			if s, _ := v.(string); !validXMatch[s] {
				return &driver.PreconditionError{Kind: "exchange", Name: ex.name, Detail: fmt.Sprintf(
					"Invalid x-match field value %v; expected all, any, all-with-x, or any-with-x", formatValue(v))}
			}
		}
	}
	if ex.findBinding(q, bd) >= 0 {
		return nil
	}
	ex.bindings = append(ex.bindings, &binding{q: q, key: bd.RoutingKey, args: cloneTable(bd.Args)})
	ex.hadBinding = true
	return nil
}

// Unbind removes a binding; removing one that does not exist is harmless.
func (c *conn) Unbind(ctx context.Context, bd driver.Binding) error {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	ex, q, err := c.bindingEnds(ctx, fmt.Sprintf("unbind queue %q from exchange %q", bd.Queue, bd.Exchange), bd)
	if err != nil {
		return err
	}
	if i := ex.findBinding(q, bd); i >= 0 {
		ex.bindings = slices.Delete(ex.bindings, i, i+1)
		b.maybeAutoDeleteExchange(ex)
	}
	return nil
}

// bindingEnds checks the connection for op and looks up the exchange and
// the queue a binding joins.
func (c *conn) bindingEnds(ctx context.Context, op string, bd driver.Binding) (*exchange, *queue, error) {
	if err := c.check(ctx, op); err != nil {
		return nil, nil, err
	}
	ex, err := c.lookupBindable(bd.Exchange)
	if err != nil {
		return nil, nil, err
	}
	q, err := c.lookupQueue(bd.Queue)
	if err != nil {
		return nil, nil, err
	}
	return ex, q, nil
}

// findBinding returns the index of ex's binding of q with bd's routing key
// and arguments, or -1.
func (ex *exchange) findBinding(q *queue, bd driver.Binding) int {
	return slices.IndexFunc(ex.bindings, func(have *binding) bool {
		return have.q == q && have.key == bd.RoutingKey && equalTables(have.args, bd.Args)
	})
}

// DeleteQueue deletes a queue and reports how many ready messages it held.
// Deleting a queue that does not exist returns 0, nil, as RabbitMQ does.
func (c *conn) DeleteQueue(ctx context.Context, name string) (int, error) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := c.check(ctx, "delete queue "+strconv.Quote(name)); err != nil {
		return 0, err
	}
	q, ok := b.queues[name]
	if !ok {
		return 0, nil
	}
	if q.exclusive && q.owner != c {
		return 0, lockedErr(name)
	}
	return b.deleteQueue(q), nil
}

// DeleteExchange deletes an exchange and its bindings. Deleting one that
// does not exist succeeds, as RabbitMQ does.
func (c *conn) DeleteExchange(ctx context.Context, name string) error {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := c.check(ctx, "delete exchange "+strconv.Quote(name)); err != nil {
		return err
	}
	if name == "" {
		return refusedErr("operation not permitted on the default exchange")
	}
	if strings.HasPrefix(name, "amq.") {
		return refusedErr("exchange name '%s' contains reserved prefix 'amq.*'", name)
	}
	delete(b.exchanges, name)
	return nil
}

// InspectQueue reports a queue's ready messages and consumers.
func (c *conn) InspectQueue(ctx context.Context, name string) (driver.QueueInfo, error) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := c.check(ctx, "inspect queue "+strconv.Quote(name)); err != nil {
		return driver.QueueInfo{}, err
	}
	q, err := c.lookupQueue(name)
	if err != nil {
		return driver.QueueInfo{}, err
	}
	b.dispatch(q)
	return q.info(), nil
}

// InspectExchange checks that an exchange exists.
func (c *conn) InspectExchange(ctx context.Context, name string) error {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := c.check(ctx, "inspect exchange "+strconv.Quote(name)); err != nil {
		return err
	}
	if name == "" {
		return nil
	}
	if _, ok := b.exchanges[name]; !ok {
		return notFound("exchange", name)
	}
	return nil
}
