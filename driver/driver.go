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
// driver-specific named type, except on the deliveries of a subscription
// that asked for unconverted headers ([ConsumeSpec].UnconvertedHeaders):
// those carry [Delivery].HeaderValue to convert each value.
package driver

import (
	"context"
	"crypto/tls"
	"iter"
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

// Capabilities reports what a broker supports.
type Capabilities struct {
	PublisherConfirms bool
	DeadLettering     bool
	QuorumQueues      bool
	Streams           bool
	Recovery          bool
}

// Conn is one connection to a broker: what every broker must do. Its
// methods are safe for concurrent use.
//
// Everything else a broker may offer is an optional interface that a Conn
// implements as well, found by type assertion (as database/sql/driver
// does): [Inspector], [Deleter], [Getter], [BatchPublisher],
// [EachPublisher], [Pinger], [BlockReporter], [CapabilityReporter],
// [Unbinder], [Purger], [Lister], [EndpointReporter] and [Clocked]; and, on the values
// a Conn returns, [Receiver] (a Subscription) and [SettleChecker] (an
// Acknowledger). Package acemq works without them, with less: without an
// Inspector a queue cannot be inspected or browsed, without a Pinger the
// health check cannot probe the broker. The conformance suite in package
// drivertest runs each optional part a driver has.
type Conn interface {
	DeclareExchange(ctx context.Context, e Exchange) error
	// DeclareQueue declares a queue. A queue that exists with different
	// settings fails with a *PreconditionError naming the difference.
	DeclareQueue(ctx context.Context, q Queue) (QueueInfo, error)
	Bind(ctx context.Context, b Binding) error

	// Publish sends one message and, when confirms are on, waits for the
	// broker's confirm. A mandatory message that nothing routes fails with
	// a *ReturnError; a broker nack with ErrNacked; a publish whose channel
	// died before its confirm with an error wrapping ErrLost; a blocked
	// connection with ErrBlocked. Many goroutines may publish at once.
	Publish(ctx context.Context, m Message) error

	// Consume starts a subscription.
	Consume(ctx context.Context, spec ConsumeSpec) (Subscription, error)

	// Close closes the connection. Subscriptions end and their Deliveries
	// channels close, and a Subscription.Close in progress on another
	// goroutine returns: package acemq waits for those after closing the
	// connection, so a driver must not let one outlast it.
	Close() error
}

// Inspector is implemented by a Conn that can check, passively, what
// exists on the broker.
type Inspector interface {
	// InspectQueue is a passive declaration: it creates nothing and fails
	// with an error wrapping ErrNotFound when the queue does not exist.
	InspectQueue(ctx context.Context, name string) (QueueInfo, error)
	// InspectExchange is a passive declaration of an exchange.
	InspectExchange(ctx context.Context, name string) error
}

// Deleter is implemented by a Conn that can delete queues and exchanges.
type Deleter interface {
	// DeleteQueue deletes a queue and returns how many messages it held.
	DeleteQueue(ctx context.Context, name string) (int, error)
	DeleteExchange(ctx context.Context, name string) error
}

// Getter is implemented by a Conn that can fetch a message without a
// subscription.
type Getter interface {
	// Get fetches one message without auto-ack (basic.get). ok is false
	// when the queue is empty.
	Get(ctx context.Context, queue string) (d Delivery, ok bool, err error)
}

// BatchPublisher is implemented by a Conn that publishes a batch faster
// than one Publish per message.
type BatchPublisher interface {
	// PublishBatch sends every message, then awaits every confirm, and
	// returns one error (nil for confirmed) per message, in order.
	PublishBatch(ctx context.Context, ms []Message) []error
}

// EachPublisher is implemented by a Conn that publishes a sequence of
// messages from one caller without waiting for each confirm before sending
// the next: each message is made just before it is sent, so that making the
// next overlaps the broker's work on those before it, and the confirm window
// slides inside the sequence, however long it is. Package acemq's SendAll and
// SendSeq use it.
type EachPublisher interface {
	// PublishEach publishes each message ms yields, in order, and calls
	// done once for each pair ms yields, in the same order, with that
	// message's result: nil for a confirmed message; the yielded error
	// for one that could not be made (nothing is published for it); else
	// the publish's error, as Publish would return it.
	//
	// It keeps publishing while earlier messages await their confirms, as
	// many at once as MaxOutstanding allows (when every permit is taken it
	// awaits its own oldest publish first). A result is reported, in order,
	// when ms yields its next message or ends; done runs on the caller's
	// goroutine, inside PublishEach.
	//
	// The driver uses a yielded *Message only until it asks ms for the
	// next one (what the message's fields refer to, such as its headers
	// and body, it may keep). When ctx ends PublishEach stops taking
	// messages from ms (the message it was given then is reported with
	// ctx's error and not published), reports the outstanding ones, with
	// ctx's error where no confirm arrived in time, and returns; messages
	// ms did not yield have no result.
	PublishEach(ctx context.Context, ms iter.Seq2[*Message, error], done func(error))
}

// Pinger is implemented by a Conn that can check that the broker answers.
type Pinger interface {
	// Ping checks that the broker answers, within ctx. It creates nothing
	// that outlives the call.
	Ping(ctx context.Context) error
}

// BlockReporter is implemented by a Conn whose broker can block
// publishing (RabbitMQ's resource alarms).
type BlockReporter interface {
	// Blocked reports whether the broker has blocked publishing on this
	// connection and the reason it gave.
	Blocked() (bool, string)
}

// CapabilityReporter is implemented by a Conn that can say what its broker
// supports.
type CapabilityReporter interface {
	Capabilities() Capabilities
}

// Unbinder is implemented by a Conn that can remove a binding.
type Unbinder interface {
	Unbind(ctx context.Context, b Binding) error
}

// Lister is implemented by a Conn that can list what its broker holds:
// the memory broker does. (AMQP 0-9-1 has no way to list; RabbitMQ lists
// through its management API, which is not part of the driver.)
type Lister interface {
	// ListQueues returns the broker's queues, sorted by name: each one's
	// declaration (Exclusive is true of an exclusive queue of any
	// connection) and its ready messages and consumers.
	ListQueues(ctx context.Context) ([]QueueListing, error)
	// ListExchanges returns the broker's named exchanges, sorted by name,
	// the predeclared amq.* ones included; not the nameless default one.
	ListExchanges(ctx context.Context) ([]Exchange, error)
}

// QueueListing is a queue as a Lister reports it.
type QueueListing struct {
	Queue
	Messages  int // ready messages (a stream: the messages it holds)
	Consumers int
}

// Purger is implemented by a Conn that can purge a queue.
type Purger interface {
	// PurgeQueue removes a queue's ready messages and returns how many it
	// removed. Messages delivered and not yet settled stay; if they are
	// put back they are on the queue again. A missing queue fails with an
	// error wrapping ErrNotFound; a stream cannot be purged.
	PurgeQueue(ctx context.Context, name string) (int, error)
}

// EndpointReporter is implemented by a Conn that can say which of its
// configured URLs it is connected to (a cluster's node).
type EndpointReporter interface {
	// Endpoint returns the URL of the endpoint the connection is on, with
	// any password replaced by xxxxx (RedactURL), or "" while it is down.
	Endpoint() string
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
	// Endpoint is the URL (redacted, see RedactURL) of the node lost, for
	// Lost, and of the node reached, for Recovered; "" otherwise.
	Endpoint string
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
	// EventRedeclared follows a recovery once the driver has declared
	// again what the connection declared before it was lost (its
	// exchanges, queues and bindings). A driver that does not redeclare
	// never emits it.
	EventRedeclared EventKind = "redeclared"
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
	// URLs are a broker's endpoints (a cluster's nodes), all with the same
	// scheme. A driver dials them in an order of its choosing, on the first
	// connection and on every reconnection (the RabbitMQ driver rotates
	// through them, see its package documentation).
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
	// (default 10 s). A driver may count the wait for a confirm coarsely:
	// the RabbitMQ driver's ends between one and 1⅛ ConfirmTimeouts.
	ConfirmTimeout time.Duration
	// DialTimeout bounds one connection attempt to one endpoint (default
	// 30 s).
	DialTimeout time.Duration
	// EndpointTimeout, with more than one URL, bounds the attempt to each
	// endpoint when it is shorter than DialTimeout, so that a dead node
	// costs little before the next is tried (default 5 s). With one URL
	// only DialTimeout applies.
	EndpointTimeout time.Duration
	// OnEvent is called, on a goroutine of the driver's, for every
	// connection state transition. It must not block for long.
	OnEvent func(Event)
}
