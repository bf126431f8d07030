// Package driver defines the transport interface that a message broker
// implements for acemq, in the way database/sql/driver does for databases.
//
// Application code does not use this package directly: it imports the
// portable API in the module root (package acemq) and registers a driver by
// scheme. The in-process broker (package memory) registers "memory"; the
// RabbitMQ driver (package rabbitmq) registers "amqp" and "amqps" when it is
// imported for its side effects.
//
// Nothing in this package knows what an AceMQ envelope means: headers are an
// opaque table, bodies opaque bytes.
//
// # Header values
//
// Header tables ([Table]) hold the value types an AMQP 0-9-1 field table can
// carry, as Go values: string, []byte, bool, int8, int16, int32, int64, uint8,
// uint16, uint32, float32, float64, time.Time, [Decimal], nil, []any (an
// array) and Table (a nested table). Drivers convert to and from their wire
// representation and must hand nested tables up as Table, never as a
// driver-specific named type.
package driver

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/url"
	"sort"
	"sync"
	"time"
)

// Table is an AMQP field table: message headers and declaration arguments.
type Table = map[string]any

// Decimal is an AMQP decimal value: Value × 10^-Scale.
type Decimal struct {
	Scale uint8
	Value int32
}

// Exchange kinds understood by every driver.
const (
	Direct  = "direct"
	Topic   = "topic"
	Fanout  = "fanout"
	Headers = "headers"
)

// Exchange describes an exchange declaration.
type Exchange struct {
	Name       string
	Kind       string // Direct, Topic, Fanout or Headers
	Durable    bool
	AutoDelete bool
	Internal   bool
	Args       Table
}

// Queue describes a queue declaration. Queue types are expressed through
// Args ("x-queue-type"); a driver never adds arguments of its own.
type Queue struct {
	Name       string
	Durable    bool
	Exclusive  bool
	AutoDelete bool
	Args       Table
}

// QueueInfo is what the broker reports about a queue.
type QueueInfo struct {
	Name      string
	Messages  int
	Consumers int
}

// Binding binds a queue to an exchange.
type Binding struct {
	Queue      string
	Exchange   string
	RoutingKey string
	Args       Table
}

// Message is an outbound message.
type Message struct {
	Exchange   string
	RoutingKey string
	// Mandatory asks the broker to return the message when no queue is bound
	// for it; Publish then fails with a *ReturnError. Returns are matched to
	// their publish by MessageID, so a mandatory message needs one (every
	// publish the acemq package makes has one); a driver may report a
	// return without a MessageID as confirmed.
	Mandatory bool
	// AlwaysConfirm waits for the broker's confirm even on a connection
	// opened with Config.NoConfirms; the library sets it on every publish it
	// makes for itself (retries, dead letters, replays).
	AlwaysConfirm bool
	// Transient publishes with delivery mode 1; the default is persistent (2).
	Transient     bool
	ContentType   string
	MessageID     string
	CorrelationID string
	ReplyTo       string
	// Expiration is the per-message TTL in milliseconds as a decimal string;
	// empty means none.
	Expiration string
	Headers    Table
	Body       []byte
}

// Delivery is an inbound message together with the means to settle it.
type Delivery struct {
	Exchange      string
	RoutingKey    string
	ContentType   string
	MessageID     string
	CorrelationID string
	ReplyTo       string
	Persistent    bool
	Redelivered   bool
	Headers       Table
	Body          []byte
	// ConsumerTag is empty for a message fetched with Get.
	ConsumerTag string
	DeliveryTag uint64

	// Acknowledger settles the delivery. It is set by the driver.
	Acknowledger Acknowledger
}

// Ack acknowledges the delivery.
func (d *Delivery) Ack() error {
	if d.Acknowledger == nil {
		return ErrNotSettleable
	}
	return d.Acknowledger.Ack(d.DeliveryTag)
}

// Nack rejects the delivery, putting it back on its queue when requeue is
// true and dead-lettering or dropping it (as the queue says) otherwise.
func (d *Delivery) Nack(requeue bool) error {
	if d.Acknowledger == nil {
		return ErrNotSettleable
	}
	return d.Acknowledger.Nack(d.DeliveryTag, requeue)
}

// CanSettle reports whether the delivery can still be settled: false when
// its acknowledger says the channel it came on is gone (the broker then
// redelivers it). An acknowledger that cannot tell is taken to say yes.
func (d *Delivery) CanSettle() bool {
	if d.Acknowledger == nil {
		return false
	}
	if c, ok := d.Acknowledger.(SettleChecker); ok {
		return c.CanSettle(d.DeliveryTag)
	}
	return true
}

// SettleChecker is implemented by an Acknowledger that can tell whether a
// delivery can still be settled. The acemq engine asks before it republishes
// a delivery after a wait: once the channel is gone the broker redelivers
// the original, and a copy would make the message run twice.
type SettleChecker interface {
	CanSettle(tag uint64) bool
}

// Acknowledger settles deliveries by tag. A delivery whose channel has gone
// cannot be settled any more: the methods return an error wrapping
// ErrChannelClosed and the broker redelivers the message.
type Acknowledger interface {
	Ack(tag uint64) error
	Nack(tag uint64, requeue bool) error
}

// ConsumeSpec describes a subscription.
type ConsumeSpec struct {
	Queue string
	// Tag is the consumer tag; a driver generates one when it is empty.
	Tag string
	// Prefetch is the number of unacknowledged deliveries the broker may
	// hand this consumer; 0 means no limit.
	Prefetch  int
	Exclusive bool
	Args      Table
}

// Subscription is a running consumer. Deliveries arrive on the channel
// returned by Deliveries until Cancel is called or the connection is closed;
// a driver that recovers from a lost connection keeps the same channel open
// and resubscribes underneath it.
type Subscription interface {
	Deliveries() <-chan Delivery
	// Tag is the consumer tag.
	Tag() string
	// Cancel stops new deliveries (basic.cancel) and closes the Deliveries
	// channel once the driver has handed up everything it already received.
	// Deliveries already handed up can still be settled after Cancel.
	Cancel(ctx context.Context) error
	// Close cancels the subscription and closes its channel: deliveries not
	// yet settled go back to the queue marked redelivered.
	Close() error
}

// Receiver is implemented by a Subscription whose deliveries can be taken
// by the reader's own goroutine, without the hand-off through the
// Deliveries channel: each hand-off between goroutines costs a wake-up per
// message. Receive returns the next delivery, or false once the
// subscription has ended (when Deliveries would have closed). It is safe
// for concurrent use. Use either Receive or Deliveries on one
// subscription, not both.
type Receiver interface {
	Receive() (Delivery, bool)
}

// Receive returns a function that takes the subscription's next delivery:
// its Receive method when it implements Receiver, else a read from its
// Deliveries channel.
func Receive(s Subscription) func() (Delivery, bool) {
	if r, ok := s.(Receiver); ok {
		return r.Receive
	}
	ch := s.Deliveries()
	return func() (Delivery, bool) {
		d, ok := <-ch
		return d, ok
	}
}

// Capabilities reports what a broker supports.
type Capabilities struct {
	PublisherConfirms bool
	DeadLettering     bool
	QuorumQueues      bool
	Streams           bool
	Recovery          bool
}

// Conn is one connection to a broker. Its methods are safe for concurrent use.
type Conn interface {
	DeclareExchange(ctx context.Context, e Exchange) error
	// DeclareQueue declares a queue. A queue that exists with different
	// settings fails with a *PreconditionError naming the difference.
	DeclareQueue(ctx context.Context, q Queue) (QueueInfo, error)
	Bind(ctx context.Context, b Binding) error
	Unbind(ctx context.Context, b Binding) error
	// DeleteQueue deletes a queue and returns how many messages it held.
	DeleteQueue(ctx context.Context, name string) (int, error)
	DeleteExchange(ctx context.Context, name string) error
	// InspectQueue is a passive declaration: it creates nothing and fails
	// with an error wrapping ErrNotFound when the queue does not exist.
	InspectQueue(ctx context.Context, name string) (QueueInfo, error)
	// InspectExchange is a passive declaration of an exchange.
	InspectExchange(ctx context.Context, name string) error

	// Publish sends one message and, when confirms are on, waits for the
	// broker's confirm. A mandatory message that nothing routes fails with
	// a *ReturnError; a broker nack with ErrNacked; a publish whose channel
	// died before its confirm with an error wrapping ErrLost; a blocked
	// connection with ErrBlocked. Many goroutines may publish at once.
	Publish(ctx context.Context, m Message) error
	// PublishBatch sends every message, then awaits every confirm, and
	// returns one error (nil for confirmed) per message, in order.
	PublishBatch(ctx context.Context, ms []Message) []error

	// Consume starts a subscription.
	Consume(ctx context.Context, spec ConsumeSpec) (Subscription, error)
	// Get fetches one message without auto-ack (basic.get). ok is false
	// when the queue is empty.
	Get(ctx context.Context, queue string) (d Delivery, ok bool, err error)

	Capabilities() Capabilities
	// Blocked reports whether the broker has blocked publishing on this
	// connection (a resource alarm) and the reason it gave.
	Blocked() (bool, string)
	// Ping checks that the broker answers, within ctx. It creates nothing
	// that outlives the call.
	Ping(ctx context.Context) error
	// Close closes the connection. Subscriptions end and their Deliveries
	// channels close.
	Close() error
}

// Event is a connection state transition, reported to Config.OnEvent.
type Event struct {
	Kind EventKind
	// Attempt counts reconnection attempts since the connection was lost.
	Attempt int
	// Err is the cause, for Lost and Retrying.
	Err error
	// Reason is the broker's reason, for Blocked.
	Reason string
	// Delay is the wait before the next attempt, for Retrying.
	Delay time.Duration
}

// EventKind names a connection state transition.
type EventKind string

// The connection events.
const (
	EventLost      EventKind = "lost"
	EventRetrying  EventKind = "retrying"
	EventRecovered EventKind = "recovered"
	EventBlocked   EventKind = "blocked"
	EventUnblocked EventKind = "unblocked"
)

// Credentials is a user name and password.
type Credentials struct {
	Username string
	Password string
}

// String never reveals the password.
func (c Credentials) String() string { return c.Username + ":xxxxx" }

// Config is what a driver needs to open a connection. The acemq package
// fills it from its options; zero values mean the documented defaults.
type Config struct {
	// URLs are tried in turn, on the first connection and on every
	// reconnection. All have the same scheme.
	URLs []string
	// Name is shown in the broker's management UI (connection_name).
	Name string
	// TLS configures amqps:// connections. Nil means verify the broker with
	// the system roots.
	TLS *tls.Config
	// Credentials, when set, is called on every (re)connection and overrides
	// the user and password in the URL.
	Credentials func(ctx context.Context) (Credentials, error)
	// NoConfirms switches publisher confirms off for application publishes.
	NoConfirms bool
	// MaxOutstanding bounds publishes awaiting a confirm (default 1000).
	MaxOutstanding int
	// ConfirmTimeout bounds the wait for a permit and for a confirm
	// (default 10 s).
	ConfirmTimeout time.Duration
	// DialTimeout bounds one connection attempt (default 30 s).
	DialTimeout time.Duration
	// OnEvent is called, on a goroutine of the driver's, for every
	// connection state transition. It must not block for long.
	OnEvent func(Event)
}

// Driver opens connections for the URL schemes it is registered under.
type Driver interface {
	Open(ctx context.Context, cfg Config) (Conn, error)
}

var (
	registryMu sync.RWMutex
	registry   = map[string]Driver{}
)

// Register makes a driver available for a URL scheme. It panics if the
// scheme is already registered or the driver is nil.
func Register(scheme string, d Driver) {
	registryMu.Lock()
	defer registryMu.Unlock()
	if d == nil {
		panic("driver: Register driver is nil")
	}
	if _, dup := registry[scheme]; dup {
		panic("driver: Register called twice for scheme " + scheme)
	}
	registry[scheme] = d
}

// Schemes lists the registered URL schemes, sorted.
func Schemes() []string {
	registryMu.RLock()
	defer registryMu.RUnlock()
	out := make([]string, 0, len(registry))
	for s := range registry {
		out = append(out, s)
	}
	sort.Strings(out)
	return out
}

// Lookup returns the driver registered for the scheme of rawURL.
func Lookup(rawURL string) (Driver, error) {
	u, err := url.Parse(rawURL)
	if err != nil {
		return nil, fmt.Errorf("acemq: the broker URL cannot be parsed: %w", Redact(err))
	}
	registryMu.RLock()
	d, ok := registry[u.Scheme]
	registryMu.RUnlock()
	if !ok {
		hint := ""
		if u.Scheme == "amqp" || u.Scheme == "amqps" {
			hint = `; import _ "github.com/acemq/acemq/rabbitmq" to register it`
		}
		return nil, fmt.Errorf("acemq: no driver is registered for scheme %q (registered: %v)%s", u.Scheme, Schemes(), hint)
	}
	return d, nil
}

// Redact returns err with any URL password removed from its text.
func Redact(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return fmt.Errorf("%s %q: %v", ue.Op, RedactURL(ue.URL), ue.Err)
	}
	return err
}

// RedactURL returns rawURL with its password replaced by "xxxxx".
func RedactURL(rawURL string) string {
	u, err := url.Parse(rawURL)
	if err != nil {
		return "(unparseable URL)"
	}
	return u.Redacted()
}

// Errors a driver reports. Drivers wrap them with detail; callers test with
// errors.Is.
var (
	// ErrNotFound: a passive declaration named something that does not exist.
	ErrNotFound = errors.New("not found")
	// ErrNacked: the broker refused (nacked) a publish.
	ErrNacked = errors.New("the broker refused the publish (nack)")
	// ErrLost: the channel or connection died before the publish was
	// confirmed. The message may or may not have reached a queue.
	ErrLost = errors.New("the connection was lost before the broker confirmed the publish; it may or may not have been delivered")
	// ErrBlocked: the broker has blocked publishing (a resource alarm).
	ErrBlocked = errors.New("the broker has blocked this connection; publishing is paused")
	// ErrConfirmTimeout: no confirm, or no permit to publish, arrived in time.
	ErrConfirmTimeout = errors.New("timed out waiting for a publisher confirm")
	// ErrClosed: the connection was closed by the application.
	ErrClosed = errors.New("the connection is closed")
	// ErrChannelClosed: the channel a delivery came on is gone.
	ErrChannelClosed = errors.New("the channel is closed")
	// ErrNotSettleable: a delivery with no acknowledger.
	ErrNotSettleable = errors.New("the delivery cannot be settled")
)

// ReturnError reports a mandatory publish that the broker could not route.
type ReturnError struct {
	Exchange   string
	RoutingKey string
	Code       int    // 312 for NO_ROUTE
	Text       string // "NO_ROUTE"
}

func (e *ReturnError) Error() string {
	return fmt.Sprintf("the message was unroutable: %d %s (exchange %q, routing key %q)", e.Code, e.Text, e.Exchange, e.RoutingKey)
}

// PreconditionError reports a declaration that conflicts with what the
// broker already has (PRECONDITION_FAILED, 406).
type PreconditionError struct {
	// Kind is "queue" or "exchange".
	Kind string
	Name string
	// Detail is the broker's text, naming the differing argument.
	Detail string
}

func (e *PreconditionError) Error() string {
	return fmt.Sprintf("the %s %q exists with different settings: %s", e.Kind, e.Name, e.Detail)
}

// AccessError reports a declaration refused for exclusivity or permissions
// (RESOURCE_LOCKED 405, ACCESS_REFUSED 403).
type AccessError struct {
	Code int
	Text string
}

func (e *AccessError) Error() string {
	return fmt.Sprintf("the broker refused access: %d %s", e.Code, e.Text)
}
