// Package memory is an in-process AMQP 0-9-1 broker that implements
// driver.Conn, registered for the "memory" URL scheme.
//
// Every distinct URL memory://NAME names one broker, shared by every
// connection opened on that URL within the process: a publisher connection
// and a consumer connection on memory://x see the same exchanges and queues.
// A broker lives, like a real one, until the process exits or [Reset] is
// called; closing every connection does not empty it.
//
// The broker is honest where a messaging library relies on RabbitMQ's
// behaviour:
//
//   - Exchanges: direct, topic ("*" is one word, "#" zero or more), fanout
//     and headers (x-match all/any/all-with-x/any-with-x). The default
//     exchange "" routes by queue name. Declaring "" or a name starting
//     "amq." is refused with ACCESS_REFUSED (403); amq.direct, amq.topic,
//     amq.fanout and amq.headers exist for binding and passive inspection.
//   - Queues: durable, exclusive (owned by the declaring connection, locked
//     for others with RESOURCE_LOCKED 405, deleted when it closes),
//     auto-delete (deleted when its last consumer goes) and server-named
//     (an empty name gets "amq.gen-…"). x-queue-type may be "classic" (the
//     same as absent) or "quorum" (which must be durable, non-exclusive and
//     non-auto-delete) or "stream" (an append-only log read from an offset;
//     see stream.go for what is implemented).
//   - A transient queue must be exclusive: declaring a transient
//     non-exclusive queue fails with a *driver.AccessError of code 541
//     naming transient_nonexcl_queues, as RabbitMQ 4 answers where that
//     deprecated feature is denied (4.3 still permits it by default).
//   - Redeclaring with different settings fails with a
//     *driver.PreconditionError whose Detail is RabbitMQ's text, for
//     example "inequivalent arg 'x-message-ttl' for queue 'q' in vhost '/':
//     received the value '300' of type 'long' but current is the value
//     '200' of type 'long'". Integer arguments compare equal across widths.
//     Unlike RabbitMQ, every argument is compared, including ones RabbitMQ
//     ignores (unknown queue arguments, exchange arguments other than
//     alternate-exchange): the memory broker errs on the strict side.
//     Redeclaring an existing queue with a different exclusive flag fails
//     with RESOURCE_LOCKED (405), as RabbitMQ does.
//   - Queue arguments implemented: x-message-ttl, x-dead-letter-exchange,
//     x-dead-letter-routing-key, x-queue-type, x-max-priority (highest
//     priority first), x-single-active-consumer (one consumer receives, the
//     others stand by and take over in order), on quorum queues
//     x-delivery-limit, and, on streams, x-max-age, x-max-length-bytes and
//     x-stream-max-segment-size-bytes. Arguments RabbitMQ knows but this
//     broker does not implement (x-max-length, x-expires, x-overflow, …)
//     are refused rather than silently ignored.
//   - Quorum queues' delivery limit, as the newest RabbitMQ the library is
//     proven on (4.3) counts it: 20 unless x-delivery-limit says otherwise
//     (negative: none); a requeued reject (driver.Acknowledger.Reject) and
//     every delivery unsettled when its subscription or connection closes
//     count, a requeued nack does not; a message returned once more than
//     the limit is dead-lettered with the reason delivery_limit, or
//     dropped when the queue has no dead-letter exchange. Redeliveries
//     from a quorum queue carry x-delivery-count and x-acquired-count as
//     RabbitMQ 4.3 writes them. RabbitMQ 3.x and 4.0 to 4.2 count every
//     return, nacks included; 3.x has no default limit.
//   - Publishing: mandatory messages that route nowhere fail with
//     *driver.ReturnError (312 NO_ROUTE); a missing exchange fails with an
//     error wrapping driver.ErrNotFound; the publish returns once the
//     message is enqueued (the confirm). Bodies and headers are deep-copied,
//     and header values must be of the types package driver lists (a Go int
//     is refused, as it has no AMQP width).
//   - Consuming: round-robin across a queue's consumers, prefetch limits,
//     requeue with Redelivered, dead-lettering with x-death and the
//     x-first-death-*/x-last-death-* headers, TTL expiry from the head of the
//     queue on a timer (with nothing consuming), per-message expiration.
//   - Time: a broker keeps real time unless SetClock gives it a clock of a
//     test's own (a FakeClock): then its TTLs expire, and its x-death times
//     and stream timestamps read, on that clock, and its connections
//     report it (driver.Clocked), so that the library's consumer waits and
//     the scheduler follow it too. Package acemqtest's NewClock does this
//     for a test.
//
// Settling a delivery whose subscription or connection has closed returns
// an error wrapping driver.ErrChannelClosed; settling an unknown or already
// settled tag returns a PRECONDITION_FAILED error (RabbitMQ would close the
// channel; the memory broker only reports it).
package memory

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"errors"
	"fmt"
	"strings"
	"sync"

	"github.com/acemq/acemq/driver"
)

// Driver opens connections to in-process brokers. It is registered for the
// "memory" scheme; applications reach it through the acemq package with a
// memory://NAME URL.
type Driver struct{}

func init() {
	driver.Register("memory", Driver{})
}

// Open connects to the broker named by the first of cfg.URLs, creating it on
// first use. Only the URL matters; the rest of cfg is ignored.
func (Driver) Open(ctx context.Context, cfg driver.Config) (driver.Conn, error) {
	if err := ctx.Err(); err != nil {
		return nil, fmt.Errorf("memory: open: %w", err)
	}
	if len(cfg.URLs) == 0 {
		return nil, errors.New("memory: open: no URL given (want memory://NAME)")
	}
	name, err := brokerName(cfg.URLs[0])
	if err != nil {
		return nil, driver.Permanent(err)
	}
	return getBroker(name).connect(), nil
}

// brokerName returns the broker key for a memory URL: host and path.
func brokerName(raw string) (string, error) {
	u, err := driver.ParseURL(raw)
	if err != nil {
		return "", fmt.Errorf("memory: the URL cannot be parsed: %w", err)
	}
	if u.Scheme != "memory" {
		return "", fmt.Errorf("memory: the URL %q does not use the memory scheme (want memory://NAME)", driver.RedactURL(raw))
	}
	return u.Host + u.Path + u.Opaque, nil
}

var (
	brokersMu sync.Mutex
	brokers   = map[string]*broker{}
)

func getBroker(name string) *broker {
	brokersMu.Lock()
	defer brokersMu.Unlock()
	b := brokers[name]
	if b == nil {
		b = newBroker(name)
		brokers[name] = b
	}
	return b
}

// Reset discards the broker with the given name, as if it had been
// restarted with nothing durable on disk: its connections are closed (their
// subscriptions end) and the next connection on the same URL finds an empty
// broker. name is either the URL ("memory://x") or its host and path ("x").
// Resetting a broker that does not exist does nothing.
func Reset(name string) {
	if strings.HasPrefix(name, "memory:") {
		if n, err := brokerName(name); err == nil {
			name = n
		}
	}
	brokersMu.Lock()
	b := brokers[name]
	delete(brokers, name)
	brokersMu.Unlock()
	if b != nil {
		b.shutdown()
	}
}

// broker is one in-process broker. A single mutex guards all of its state;
// nothing blocks while holding it.
type broker struct {
	name string

	mu        sync.Mutex
	exchanges map[string]*exchange
	queues    map[string]*queue
	conns     map[*conn]struct{}
	seq       uint64 // message sequence, for requeue ordering
	connSeq   uint64
	clock     driver.Clock // real time unless SetClock gave another
}

func newBroker(name string) *broker {
	b := &broker{
		name:      name,
		clock:     driver.RealClock,
		exchanges: map[string]*exchange{},
		queues:    map[string]*queue{},
		conns:     map[*conn]struct{}{},
	}
	for _, kind := range []string{driver.Direct, driver.Topic, driver.Fanout, driver.Headers} {
		b.exchanges["amq."+kind] = &exchange{name: "amq." + kind, kind: kind, durable: true}
	}
	return b
}

func (b *broker) connect() *conn {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.connSeq++
	c := &conn{
		b:          b,
		id:         b.connSeq,
		subs:       map[*sub]struct{}{},
		getUnacked: map[uint64]*unacked{},
	}
	c.getAck = getAcker{c}
	b.conns[c] = struct{}{}
	return c
}

// shutdown closes every connection and stops every timer.
func (b *broker) shutdown() {
	b.mu.Lock()
	conns := make([]*conn, 0, len(b.conns))
	for c := range b.conns {
		conns = append(conns, c)
	}
	b.mu.Unlock()
	for _, c := range conns {
		_ = c.Close()
	}
	b.mu.Lock()
	for _, q := range b.queues {
		q.stopTimer()
	}
	b.mu.Unlock()
}

// exchange is a declared exchange and its bindings.
type exchange struct {
	name       string
	kind       string
	durable    bool
	autoDelete bool
	internal   bool
	args       driver.Table
	bindings   []*binding
	hadBinding bool
}

type binding struct {
	q    *queue
	key  string
	args driver.Table
}

// randomName returns prefix followed by 22 random URL-safe characters, the
// shape of RabbitMQ's generated names.
func randomName(prefix string) string {
	var buf [16]byte
	_, _ = rand.Read(buf[:])
	return prefix + base64.RawURLEncoding.EncodeToString(buf[:])
}

// Errors, worded like the broker's replies.

func notFound(kind, name string) error {
	return fmt.Errorf("memory: 404 NOT_FOUND - no %s '%s' in vhost '/': %w", kind, name, driver.ErrNotFound)
}

func closedErr(op string) error {
	return fmt.Errorf("memory: %s: %w", op, driver.ErrClosed)
}

func lockedErr(q string) error {
	return &driver.AccessError{Code: 405, Text: fmt.Sprintf(
		"RESOURCE_LOCKED - cannot obtain exclusive access to locked queue '%s' in vhost '/'. "+
			"It could be originally declared on another connection or the exclusive property value "+
			"does not match that of the original declaration.", q)}
}

func refusedErr(format string, args ...any) error {
	return &driver.AccessError{Code: 403, Text: "ACCESS_REFUSED - " + fmt.Sprintf(format, args...)}
}

func ctxErr(ctx context.Context, op string) error {
	if err := ctx.Err(); err != nil {
		return fmt.Errorf("memory: %s: %w", op, err)
	}
	return nil
}
