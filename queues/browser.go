package queues

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/wire"
)

// Browse opens a Browser on the queue called name, which must exist (else
// the error wraps acemq.ErrNotFound). It needs a driver that can fetch
// without a subscription (driver.Getter) and inspect (driver.Inspector);
// both built-in drivers can.
func Browse(ctx context.Context, conn *acemq.Conn, name string) (*Browser, error) {
	eng := engine.Of(conn)
	if eng == nil {
		return nil, fmt.Errorf("queues: browsing the queue %q needs a connection", name)
	}
	g, ok := eng.Getter()
	if !ok {
		return nil, fmt.Errorf("queues: the driver of %s cannot fetch messages without a consumer: %w", conn, acemq.ErrUnsupported)
	}
	if _, err := Inspect(ctx, conn, name); err != nil {
		return nil, err
	}
	return &Browser{eng: eng, g: g, queue: name, held: map[uint64]*held{}}, nil
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
// messages it read is not kept in memory by the browser. Close puts every
// message still held back on the queue, at its head, in one go. What that
// costs: the broker marks a put-back message redelivered; it goes back
// with a nack (not processed), which RabbitMQ 4.3 and later do not count
// against a quorum queue's delivery limit but 3.x and 4.0 to 4.2 do (a
// lost connection's return counts on every version); held messages are
// not among a queue's ready messages (Inspect); and a browser that is
// never closed holds its messages until its connection goes. A lost
// connection returns every held message to the queue, and a Take or Move
// of one after that fails (the broker delivers it again later).
//
// A Browser is safe for concurrent use.
type Browser struct {
	eng   *engine.Conn
	g     driver.Getter
	queue string

	mu     sync.Mutex
	seq    uint64
	held   map[uint64]*held
	closed bool
}

// held is what a browser keeps of a message it holds.
type held struct {
	d *driver.Delivery // without its body and headers
	// untyped is the type the message was read with when it came without
	// an x-acemq-type (the routing key's fallback), else "".
	untyped string
}

// Message is a message a Browser read and holds: the delivery as a
// consumer of []byte would get it (its Payload is the body), which the
// browser that returned it can Take or Move.
type Message struct {
	acemq.Message[[]byte]

	b   *Browser
	seq uint64
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
// arrive later, and a later Next returns them.
func (b *Browser) Next(ctx context.Context) (m Message, ok bool, err error) {
	b.mu.Lock()
	closed := b.closed
	b.mu.Unlock()
	if closed {
		return m, false, fmt.Errorf("queues: browsing %q: the browser is closed", b.queue)
	}
	d, ok, err := b.g.Get(ctx, b.queue)
	if err != nil {
		return m, false, fmt.Errorf("queues: browsing %q: %w", b.queue, err)
	}
	if !ok {
		return m, false, nil
	}
	env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
	// What the browser holds is the delivery's tag and properties, not its
	// body or headers: the message returned carries those, and a browser
	// holding a thousand messages holds no more than that of them.
	hd := d
	hd.Body, hd.Headers = nil, nil
	h := &held{d: &hd}
	if typ, _ := wire.String(d.Headers[wire.HeaderType]); typ == "" {
		h.untyped = env.Type()
	}
	b.mu.Lock()
	if b.closed { // closed while fetching: put it straight back
		b.mu.Unlock()
		_ = d.Nack(true)
		return Message{}, false, fmt.Errorf("queues: browsing %q: the browser is closed", b.queue)
	}
	b.seq++
	seq := b.seq
	b.held[seq] = h
	b.mu.Unlock()
	m.Message = acemq.Message[[]byte]{
		Payload:       d.Body,
		Envelope:      env,
		Queue:         b.queue,
		Exchange:      d.Exchange,
		RoutingKey:    d.RoutingKey,
		ContentType:   d.ContentType,
		ReplyTo:       d.ReplyTo,
		CorrelationID: d.CorrelationID,
		Redelivered:   d.Redelivered,
		Body:          d.Body,
	}
	m.Offset, m.FromStream = d.StreamOffset()
	m.b, m.seq = b, seq
	return m, true, nil
}

// holding returns what the browser holds of m, and removes it when take is
// true.
func (b *Browser) holding(m Message, take bool) (*held, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	h, ok := b.held[m.seq]
	if m.b != b || !ok {
		return nil, fmt.Errorf("queues: browsing %q: %w", b.queue, errNotHeld)
	}
	if take {
		delete(b.held, m.seq)
	}
	return h, nil
}

// Take removes m, which Next returned, from the queue for good
// (acknowledges it).
func (b *Browser) Take(m Message) error {
	h, err := b.holding(m, true)
	if err != nil {
		return err
	}
	if err := h.d.Ack(); err != nil {
		return fmt.Errorf("queues: taking message %s from %q: %w", m.Envelope.ID(), b.queue, err)
	}
	return nil
}

// Move publishes m, which Next returned, again — the same message: its
// body (m.Body), content type, reply-to and correlation-id properties —
// with env as its envelope (usually m.Envelope changed with
// Envelope.Change; its unknown x-acemq-* headers go with it) to exchange
// with routingKey, persistent, mandatory and confirmed, and only then takes
// m from the queue. When m came without an x-acemq-type and env keeps the
// type it was read with (the routing key's fallback), the message is
// written with routingKey as its type, as it would have been typed had it
// been published there; so is an env without a type.
//
// When the publish fails (unroutable, not confirmed), m stays held and goes
// back to the queue when the browser closes: a failed Move can duplicate a
// message (a publish that reached the broker without a confirm arriving),
// never lose one.
func (b *Browser) Move(ctx context.Context, m Message, exchange, routingKey string, env acemq.Envelope) error {
	h, err := b.holding(m, false)
	if err != nil {
		return err
	}
	if env.ID() == "" { // the zero Envelope: one with the defaults
		env = acemq.MustEnvelope(acemq.Fields{})
	}
	typ := env.Type()
	if h.untyped != "" && typ == h.untyped {
		typ = ""
	}
	headers := env.AppendHeaders(nil, routingKey)
	if typ == "" {
		headers[wire.HeaderType] = routingKey
		if routingKey == "" {
			headers[wire.HeaderType] = wire.DefaultType
		}
	}
	d := h.d
	out := driver.Message{
		Exchange:      exchange,
		RoutingKey:    routingKey,
		Mandatory:     true,
		AlwaysConfirm: true,
		ContentType:   d.ContentType,
		MessageID:     env.ID(),
		CorrelationID: d.CorrelationID,
		ReplyTo:       d.ReplyTo,
		Headers:       headers,
		Body:          m.Body,
	}
	id := engine.Identity{ID: env.ID(), Type: typ, CorrelationID: env.CorrelationID()}
	if err := b.eng.PublishAs(ctx, out, id); err != nil {
		return fmt.Errorf("queues: moving message %s from %q to exchange %q with routing key %q: %w", env.ID(), b.queue, exchange, routingKey, err)
	}
	if _, err := b.holding(m, true); err != nil {
		return err
	}
	if err := d.Ack(); err != nil {
		return fmt.Errorf("queues: message %s was published to exchange %q with routing key %q but could not be taken from %q, so it is there too and will be read again (%w): %w", env.ID(), exchange, routingKey, b.queue, ErrNotTaken, err)
	}
	return nil
}

// Close puts every message the browser still holds back on the queue and
// ends the browser. It returns the first failure to put one back (the
// broker delivers such a message again anyway once its channel is gone).
// Close is idempotent.
func (b *Browser) Close() error {
	b.mu.Lock()
	all := b.held
	b.held = map[uint64]*held{}
	b.closed = true
	last := b.seq
	b.mu.Unlock()
	var first error
	for seq := uint64(1); seq <= last; seq++ { // in the order read
		if h, ok := all[seq]; ok {
			if err := h.d.Nack(true); err != nil && first == nil {
				first = fmt.Errorf("queues: putting a message back on %q: %w", b.queue, err)
			}
		}
	}
	return first
}
