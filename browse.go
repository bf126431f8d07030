package acemq

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/acemq/acemq/driver"
)

// QueueInfo is what the broker reports about a queue.
type QueueInfo struct {
	Name string
	// Messages counts the messages ready for delivery. Messages delivered
	// to a consumer (or held by a Browser) and not yet settled are not
	// among them.
	Messages int
	// Consumers counts the consumers subscribed to the queue.
	Consumers int
}

// Inspect reports a queue's depth and consumers with a passive declaration,
// which creates nothing. A queue that does not exist fails with an error
// wrapping ErrNotFound. It needs a driver with passive checks
// (driver.Inspector; both built-in drivers have them).
func (c *Conn) Inspect(ctx context.Context, queue string) (QueueInfo, error) {
	ins, ok := c.t.(driver.Inspector)
	if !ok {
		return QueueInfo{}, fmt.Errorf("acemq: the driver of %s cannot inspect queues: %w", c, ErrUnsupported)
	}
	info, err := ins.InspectQueue(ctx, queue)
	if err != nil {
		return QueueInfo{}, fmt.Errorf("acemq: inspecting the queue %q: %w", queue, err)
	}
	return QueueInfo{Name: info.Name, Messages: info.Messages, Consumers: info.Consumers}, nil
}

// Browse opens a Browser on queue, which must exist (else the error wraps
// ErrNotFound). It needs a driver that can fetch without a subscription
// (driver.Getter) and inspect (driver.Inspector); both built-in drivers can.
func (c *Conn) Browse(ctx context.Context, queue string) (*Browser, error) {
	g, ok := c.t.(driver.Getter)
	if !ok {
		return nil, fmt.Errorf("acemq: the driver of %s cannot fetch messages without a consumer: %w", c, ErrUnsupported)
	}
	if _, err := c.Inspect(ctx, queue); err != nil {
		return nil, err
	}
	return &Browser{c: c, g: g, queue: queue, held: map[uint64]*driver.Delivery{}}, nil
}

// Browser reads a queue's messages one at a time without a consumer
// subscription (AMQP basic.get), for operators and tools: look at what is
// in a dead-letter queue, take some of it, move some of it elsewhere.
//
// Every message Next returns is held by the browser: unacknowledged, so no
// consumer gets it and the browser does not read it twice, until the
// browser takes it (Take, Move) or is closed. The browser keeps of a held
// message only what it needs to settle it (its delivery tag and
// properties), not its body or headers: what a caller drops of the
// messages it read is not kept in memory by the browser. Close puts every message still
// held back on the queue, at its head, in one go. What that costs: the
// broker marks a put-back message redelivered; it goes back with a nack
// (not processed), which RabbitMQ 4.3 and later do not count against a
// quorum queue's delivery limit but 3.x and 4.0 to 4.2 do (a lost
// connection's return counts on every version); held messages are not among a queue's
// ready messages (Inspect); and a browser that is never closed holds its
// messages until its connection goes. A lost connection returns every held
// message to the queue, and a Take or Move of one after that fails (the
// broker delivers it again later).
//
// A Browser is safe for concurrent use.
type Browser struct {
	c     *Conn
	g     driver.Getter
	queue string

	mu     sync.Mutex
	seq    uint64
	held   map[uint64]*driver.Delivery
	closed bool
}

// ErrNotTaken is wrapped by the error of a Browser.Move whose message was
// published to its target but could not then be taken from its queue (the
// channel it was read on went away): the message is in both places, and a
// later read of the queue returns it again.
var ErrNotTaken = errors.New("the message was published to its target but is still on its queue")

// errNotHeld is the cause of a Take or Move of a message the browser does
// not hold.
var errNotHeld = errors.New("the browser does not hold this message: it was read by another browser, or already taken or moved")

// Next returns the next message of the queue, held by the browser (see
// Browser). ok is false when the queue has no ready message now; more may
// arrive later, and a later Next returns them. Its Payload is the body.
func (b *Browser) Next(ctx context.Context) (m Message[[]byte], ok bool, err error) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return m, false, fmt.Errorf("acemq: browsing %q: the browser is closed", b.queue)
	}
	d, ok, err := b.g.Get(ctx, b.queue)
	if err != nil {
		return m, false, fmt.Errorf("acemq: browsing %q: %w", b.queue, err)
	}
	if !ok {
		return m, false, nil
	}
	b.mu.Lock()
	if b.closed { // closed while fetching: put it straight back
		b.mu.Unlock()
		_ = d.Nack(true)
		return Message[[]byte]{}, false, fmt.Errorf("acemq: browsing %q: the browser is closed", b.queue)
	}
	b.seq++
	seq := b.seq
	// What the browser holds is the delivery's tag and properties, not its
	// body or headers: the message returned carries those, and a browser
	// holding a thousand messages holds no more than that of them.
	h := d
	h.Body, h.Headers = nil, nil
	b.held[seq] = &h
	b.mu.Unlock()
	m = newMessage(d.Body, &d, deliveryEnvelope(&d), b.queue)
	m.browser, m.held = b, seq
	return m, true, nil
}

// release removes m from what the browser holds and returns its delivery.
func (b *Browser) release(m Message[[]byte]) (*driver.Delivery, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	d, ok := b.held[m.held]
	if m.browser != b || !ok {
		return nil, fmt.Errorf("acemq: browsing %q: %w", b.queue, errNotHeld)
	}
	delete(b.held, m.held)
	return d, nil
}

// Take removes m, which Next returned, from the queue for good
// (acknowledges it).
func (b *Browser) Take(m Message[[]byte]) error {
	d, err := b.release(m)
	if err != nil {
		return err
	}
	if err := d.Ack(); err != nil {
		return fmt.Errorf("acemq: taking message %s from %q: %w", m.Envelope.ID(), b.queue, err)
	}
	return nil
}

// Move publishes m, which Next returned, again — the same message: its
// body (m.Body), content type, reply-to and correlation-id properties — with env as
// its envelope (usually m.Envelope changed with Envelope.Change; its unknown
// x-acemq-* headers go with it) to exchange with routingKey, persistent,
// mandatory and confirmed, and only then takes m from the queue. An
// envelope whose type was never set (the message came without an
// x-acemq-type, and env sets none) is written with routingKey as its type,
// as the message would have been typed had it been published there.
//
// When the publish fails (unroutable, not confirmed), m stays held and goes
// back to the queue when the browser closes: a failed Move can duplicate a
// message (a publish that reached the broker without a confirm arriving),
// never lose one.
func (b *Browser) Move(ctx context.Context, m Message[[]byte], exchange, routingKey string, env Envelope) error {
	b.mu.Lock()
	d, ok := b.held[m.held]
	ok = ok && m.browser == b
	b.mu.Unlock()
	if !ok {
		return fmt.Errorf("acemq: browsing %q: %w", b.queue, errNotHeld)
	}
	env = env.orDefault()
	if !env.typed {
		env.typ = ""
	}
	out := driver.Message{
		Exchange:      exchange,
		RoutingKey:    routingKey,
		Mandatory:     true,
		AlwaysConfirm: true,
		ContentType:   d.ContentType,
		MessageID:     env.id,
		CorrelationID: d.CorrelationID,
		ReplyTo:       d.ReplyTo,
		Headers:       env.AppendHeaders(nil, routingKey),
		Body:          m.Body,
	}
	if err := b.c.publish(ctx, out, env); err != nil {
		return fmt.Errorf("acemq: moving message %s from %q to exchange %q with routing key %q: %w", env.id, b.queue, exchange, routingKey, err)
	}
	if _, err := b.release(m); err != nil {
		return err
	}
	if err := d.Ack(); err != nil {
		return fmt.Errorf("acemq: message %s was published to exchange %q with routing key %q but could not be taken from %q, so it is there too and will be read again (%w): %w", env.id, exchange, routingKey, b.queue, ErrNotTaken, err)
	}
	return nil
}

// Close puts every message the browser still holds back on the queue and
// ends the browser. It returns the first failure to put one back (the
// broker delivers such a message again anyway once its channel is gone).
// Close is idempotent.
func (b *Browser) Close() error {
	b.mu.Lock()
	held := b.held
	b.held = map[uint64]*driver.Delivery{}
	b.closed = true
	last := b.seq
	b.mu.Unlock()
	var first error
	for seq := uint64(1); seq <= last; seq++ { // in the order read
		if d, ok := held[seq]; ok {
			if err := d.Nack(true); err != nil && first == nil {
				first = fmt.Errorf("acemq: putting a message back on %q: %w", b.queue, err)
			}
		}
	}
	return first
}
