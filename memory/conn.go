package memory

import (
	"bytes"
	"context"
	"fmt"
	"iter"
	"strconv"
	"time"

	"github.com/acemq/acemq/driver"
)

// conn is one connection to a broker.
type conn struct {
	b  *broker
	id uint64

	// Guarded by b.mu.
	closed     bool
	subs       map[*sub]struct{}
	getTag     uint64
	getUnacked map[uint64]*unacked
	getAck     getAcker
}

// conn implements driver.Conn and every optional interface a Conn may have.
var _ interface {
	driver.Conn
	driver.Inspector
	driver.Deleter
	driver.Getter
	driver.BatchPublisher
	driver.EachPublisher
	driver.Pinger
	driver.BlockReporter
	driver.CapabilityReporter
	driver.Unbinder
} = (*conn)(nil)

// check returns an error when ctx is done or the connection is closed. The
// caller holds b.mu.
func (c *conn) check(ctx context.Context, op string) error {
	if err := ctxErr(ctx, op); err != nil {
		return err
	}
	if c.closed {
		return closedErr(op)
	}
	return nil
}

// newMessage validates an outbound message and copies it into the broker.
func newMessage(m driver.Message) (*message, error) {
	if len(m.RoutingKey) > 255 {
		return nil, fmt.Errorf("memory: publish: the routing key is longer than 255 bytes")
	}
	if len(m.Exchange) > 255 {
		return nil, fmt.Errorf("memory: publish: the exchange name is longer than 255 bytes")
	}
	if err := validateTable("header", m.Headers); err != nil {
		return nil, err
	}
	msg := &message{
		exchange:      m.Exchange,
		routingKey:    m.RoutingKey,
		contentType:   m.ContentType,
		messageID:     m.MessageID,
		correlationID: m.CorrelationID,
		replyTo:       m.ReplyTo,
		expiration:    m.Expiration,
		persistent:    !m.Transient,
		priority:      m.Priority,
		headers:       cloneTable(m.Headers),
		body:          bytes.Clone(m.Body),
	}
	if msg.body == nil {
		msg.body = []byte{}
	}
	if m.Expiration != "" {
		n, err := strconv.ParseInt(m.Expiration, 10, 64)
		if err != nil || n < 0 {
			return nil, fmt.Errorf("memory: publish: 406 PRECONDITION_FAILED - invalid expiration '%s': want a non-negative number of milliseconds", m.Expiration)
		}
		msg.msgTTL, msg.hasMsgTTL = time.Duration(n)*time.Millisecond, true
	}
	return msg, nil
}

// Publish routes a message and returns once it is enqueued on every queue it
// routes to: that is the memory broker's publisher confirm.
func (c *conn) Publish(ctx context.Context, m driver.Message) error {
	msg, err := newMessage(m)
	if err != nil {
		return err
	}
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := c.check(ctx, "publish"); err != nil {
		return err
	}
	return b.publish(msg, m.Mandatory)
}

func (b *broker) publish(m *message, mandatory bool) error {
	var targets []*queue
	if m.exchange == "" {
		if q, ok := b.queues[m.routingKey]; ok {
			targets = []*queue{q}
		}
	} else {
		ex, ok := b.exchanges[m.exchange]
		if !ok {
			return notFound("exchange", m.exchange)
		}
		if ex.internal {
			return refusedErr("cannot publish to internal exchange '%s' in vhost '/'", m.exchange)
		}
		targets = b.route(ex, m.routingKey, m.headers)
	}
	if len(targets) == 0 {
		if mandatory {
			return &driver.ReturnError{Exchange: m.exchange, RoutingKey: m.routingKey, Code: 312, Text: "NO_ROUTE"}
		}
		return nil
	}
	for _, q := range targets {
		b.enqueue(q, m.forQueue())
	}
	return nil
}

// PublishBatch publishes each message in turn and returns one error per
// message, in order.
func (c *conn) PublishBatch(ctx context.Context, ms []driver.Message) []error {
	errs := make([]error, len(ms))
	for i, m := range ms {
		errs[i] = c.Publish(ctx, m)
	}
	return errs
}

// PublishEach publishes each message ms yields in turn, each waiting for
// its confirm, and reports its result before taking the next
// (driver.EachPublisher).
func (c *conn) PublishEach(ctx context.Context, ms iter.Seq2[*driver.Message, error], done func(error)) {
	for m, err := range ms {
		if err == nil && ctx.Err() != nil {
			done(fmt.Errorf("memory: nothing was published: %w", ctx.Err()))
			return
		}
		if err == nil {
			err = c.Publish(ctx, *m)
		}
		done(err)
	}
}

// Consume starts a subscription on a queue.
func (c *conn) Consume(ctx context.Context, spec driver.ConsumeSpec) (driver.Subscription, error) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := c.check(ctx, "consume from queue "+strconv.Quote(spec.Queue)); err != nil {
		return nil, err
	}
	q, err := c.lookupQueue(spec.Queue)
	if err != nil {
		return nil, err
	}
	if spec.Prefetch < 0 {
		return nil, fmt.Errorf("memory: consume from queue %q: negative prefetch %d", spec.Queue, spec.Prefetch)
	}
	if err := validateTable("consumer argument", spec.Args); err != nil {
		return nil, err
	}
	for _, s := range q.consumers {
		if s.exclusive || spec.Exclusive {
			return nil, refusedErr("queue '%s' in vhost '/' in exclusive use", q.name)
		}
	}
	var streamStart int64
	if q.stream != nil {
		if streamStart, err = streamConsumable(q, spec); err != nil {
			return nil, err
		}
	} else if err := notStreamConsumable(q, spec); err != nil {
		return nil, err
	}
	tag := spec.Tag
	if tag == "" {
		tag = randomName("amq.ctag-")
	}
	s := &sub{
		b:         b,
		c:         c,
		q:         q,
		tag:       tag,
		prefetch:  spec.Prefetch,
		exclusive: spec.Exclusive,
		ch:        make(chan driver.Delivery),
		wake:      make(chan struct{}, 1),
		done:      make(chan struct{}),
		exited:    make(chan struct{}),
		unacked:   map[uint64]*unacked{},
	}
	q.consumers = append(q.consumers, s)
	q.hadConsumer = true
	if q.stream != nil {
		q.stream.cursors[s] = streamStart
	}
	c.subs[s] = struct{}{}
	go s.run()
	b.dispatch(q)
	return s, nil
}

// Get fetches one message without auto-ack (basic.get).
func (c *conn) Get(ctx context.Context, queue string) (driver.Delivery, bool, error) {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if err := c.check(ctx, "get from queue "+strconv.Quote(queue)); err != nil {
		return driver.Delivery{}, false, err
	}
	q, err := c.lookupQueue(queue)
	if err != nil {
		return driver.Delivery{}, false, err
	}
	if q.stream != nil {
		return driver.Delivery{}, false, fmt.Errorf("memory: get from queue %q: 540 NOT_IMPLEMENTED - basic.get not supported by stream queues queue '%s' in vhost '/'", queue, queue)
	}
	b.expireHead(q)
	if len(q.msgs) == 0 {
		b.armTimer(q)
		return driver.Delivery{}, false, nil
	}
	m := b.popHead(q)
	b.armTimer(q)
	c.getTag++
	c.getUnacked[c.getTag] = &unacked{tag: c.getTag, m: m, q: q}
	d := m.delivery()
	d.DeliveryTag = c.getTag
	d.Acknowledger = c.getAck
	return d, true, nil
}

// getAcker settles deliveries fetched with Get on a connection.
type getAcker struct{ c *conn }

// Ack acknowledges a fetched delivery.
func (a getAcker) Ack(tag uint64) error { return a.c.settleGet(tag, settleAck) }

// Nack returns a fetched delivery as not processed.
func (a getAcker) Nack(tag uint64, requeue bool) error {
	if requeue {
		return a.c.settleGet(tag, settleRequeue)
	}
	return a.c.settleGet(tag, settleDiscard)
}

// Reject returns a fetched delivery as failed.
func (a getAcker) Reject(tag uint64, requeue bool) error {
	if requeue {
		return a.c.settleGet(tag, settleRejectRequeue)
	}
	return a.c.settleGet(tag, settleRejectDiscard)
}

func (c *conn) settleGet(tag uint64, how settleKind) error {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if c.closed {
		return fmt.Errorf("memory: %s of fetched delivery %d: %w", how, tag, driver.ErrChannelClosed)
	}
	u, ok := c.getUnacked[tag]
	if !ok {
		return unknownTag(how, tag)
	}
	delete(c.getUnacked, tag)
	b.settle(u, how)
	return nil
}

// Capabilities reports what the memory broker supports.
func (c *conn) Capabilities() driver.Capabilities {
	return driver.Capabilities{
		PublisherConfirms: true,
		DeadLettering:     true,
		QuorumQueues:      true,
		Streams:           true,
	}
}

// Blocked is always false: the memory broker has no resource alarms.
func (c *conn) Blocked() (bool, string) { return false, "" }

// Ping succeeds unless ctx is done or the connection is closed.
func (c *conn) Ping(ctx context.Context) error {
	b := c.b
	b.mu.Lock()
	defer b.mu.Unlock()
	return c.check(ctx, "ping")
}

// Close closes the connection: its subscriptions end with every unsettled
// delivery requeued as redelivered, unsettled fetched messages are requeued
// too, and its exclusive queues are deleted. A subscription's Close never
// waits on more than the broker's lock and the subscription's goroutine,
// which Close ends too, so none outlasts it. Closing twice is harmless.
func (c *conn) Close() error {
	b := c.b
	b.mu.Lock()
	if c.closed {
		b.mu.Unlock()
		return nil
	}
	c.closed = true
	subs := make([]*sub, 0, len(c.subs))
	for s := range c.subs {
		subs = append(subs, s)
		b.closeSub(s)
	}
	clear(c.subs)
	b.requeueAll(c.getUnacked)
	clear(c.getUnacked)
	for _, q := range b.queues {
		if q.owner == c {
			b.deleteQueue(q)
		}
	}
	delete(b.conns, c)
	b.mu.Unlock()
	for _, s := range subs {
		<-s.exited
	}
	return nil
}
