package topology

import (
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/declare"
	"github.com/acemq/acemq/internal/field"
)

// ExchangeKind is an exchange's type, given to Topology.Exchange: one of
// the four below or a plugin's kind, whose name begins "x-"
// (ExchangeKind("x-consistent-hash")).
type ExchangeKind string

// The exchange kinds AMQP 0-9-1 defines.
const (
	ExchangeDirect  ExchangeKind = driver.Direct
	ExchangeTopic   ExchangeKind = driver.Topic
	ExchangeFanout  ExchangeKind = driver.Fanout
	ExchangeHeaders ExchangeKind = driver.Headers
)

// QueueType is a RabbitMQ queue type, chosen with WithQueueType.
type QueueType string

// The queue types (docs/wire.md §5.3). Classic is the x-queue-type
// argument's absence: no declaration writes x-queue-type=classic. The
// memory:// broker serves streams as RabbitMQ does; read them with package
// stream (docs/streams.md).
const (
	QueueQuorum  QueueType = "quorum"
	QueueClassic QueueType = "classic"
	QueueStream  QueueType = "stream"
)

// An Option configures an exchange, queue or binding added to a Topology:
// the With… functions below, and acemq.WithRetry for a queue. An option
// that does not apply to what it is given to (an exclusive exchange, a
// binding with a queue type) is a mistake that Validate reports. An option
// only records its value; Exchange, Queue and Bind check them all.
type Option interface {
	declare.Option
}

// WithDurable(false) declares a transient exchange or queue: it does not
// survive a broker restart. A transient queue is always classic. The
// default is durable.
func WithDurable(on bool) Option {
	return declare.Func(func(s *declare.Spec) { s.Transient = !on })
}

// WithAutoDelete declares an auto-delete exchange (deleted by the broker
// when its last binding goes) or queue (deleted when its last consumer
// goes). An auto-delete queue is always classic.
func WithAutoDelete() Option {
	return declare.Func(func(s *declare.Spec) { s.AutoDelete = true })
}

// WithExclusive declares an exclusive queue: owned by the declaring
// connection and deleted with it. It is always classic. It applies to
// queues only.
func WithExclusive() Option {
	return declare.Func(func(s *declare.Spec) { s.Exclusive = true })
}

// WithInternal declares an internal exchange: it can only be published to
// from other exchanges. It applies to exchanges only.
func WithInternal() Option {
	return declare.Func(func(s *declare.Spec) { s.Internal = true })
}

// WithArguments sets the arguments of an exchange (for example
// alternate-exchange), a queue (x-message-ttl, …) or a binding (a headers
// exchange matches on them). Their values are checked and converted as
// header values are (docs/envelope.md): Go int and uint values are sent as
// 64-bit integers, and a value AMQP cannot carry is a mistake Validate
// reports. On a queue, an x-queue-type argument is the same as
// WithQueueType.
func WithArguments(args map[string]any) Option {
	return declare.Func(func(s *declare.Spec) { s.Args, s.ArgsErr = field.Table(args) })
}

// WithQueueType asks for a queue type instead of the default (durable
// queues are quorum queues; exclusive, auto-delete and transient ones
// classic). Asking for QueueQuorum explicitly makes combining it with
// WithExclusive, WithAutoDelete or WithDurable(false) an error instead of
// a quiet classic queue. It applies to queues only.
func WithQueueType(t QueueType) Option {
	return declare.Func(func(s *declare.Spec) { s.QueueType = string(t) })
}

// WithDeadLettering(true) gives a queue the family's dead-letter half: it
// adds x-dead-letter-exchange=acemq.dlx and x-dead-letter-routing-key={q}.dlq
// to the queue, and declares acemq.dlx, {q}.dlq and {q}.parked with their
// bindings. The broker then dead-letters what the library never sees (TTL
// expiry, length overflow, rejections by other consumers, a quorum queue's
// delivery limit) into {q}.dlq. A queue whose arguments already set either
// dead-letter argument is refused, not overruled. It applies to queues only.
//
// Quorum queues (durable queues, by default) have it unless
// WithDeadLettering(false) is given: RabbitMQ 4 gives every quorum queue a
// delivery limit of 20 and drops a message over it when the queue has
// nowhere to dead-letter to. A quorum queue whose WithArguments set a
// dead-letter exchange of their own keeps it and gets no default. Other
// queues have no dead-letter half unless WithDeadLettering(true) is given.
// See docs/upgrading.md for a queue declared without it before.
func WithDeadLettering(on bool) Option {
	return declare.Func(func(s *declare.Spec) { s.DeadLetter, s.DeadLetterSet = on, true })
}

// WithMaxAge keeps a stream's messages for about d (x-max-age), written
// in the largest unit that states d exactly: 7D, 36h, 90m, 45s
// (docs/wire.md §5.9). d must be a positive whole number of seconds. The
// broker removes whole segments, so messages may outlive d until their
// segment goes. It applies to streams only (WithQueueType(QueueStream)).
func WithMaxAge(d time.Duration) Option {
	return declare.Func(func(s *declare.Spec) { s.MaxAge = d })
}

// WithMaxLengthBytes bounds a stream at about n bytes (x-max-length-bytes):
// when a segment fills, the oldest segments are removed while the stream
// holds more. n must be positive. It applies to streams only.
func WithMaxLengthBytes(n int64) Option {
	return declare.Func(func(s *declare.Spec) { s.MaxBytes = n })
}

// WithMaxSegmentSizeBytes sets the size of a stream's segment files
// (x-stream-max-segment-size-bytes), the unit retention removes; without
// it the broker's default (500 MB) applies and no value is invented. n must
// be positive. It applies to streams only.
func WithMaxSegmentSizeBytes(n int64) Option {
	return declare.Func(func(s *declare.Spec) { s.SegmentBytes = n })
}

// WithSingleActiveConsumer declares a queue on which one consumer at a time
// receives messages (x-single-active-consumer): the others stand by and,
// in the order they subscribed, take over when it goes, with what it left
// unsettled first. It is how a consumer group keeps strict order per queue
// (docs/ordering.md). It applies to classic and quorum queues, not
// streams.
func WithSingleActiveConsumer() Option {
	return declare.Func(func(s *declare.Spec) { s.SingleActive = true })
}

// WithMaxPriority declares a priority queue (x-max-priority = max, as a
// 32-bit integer): it delivers messages sent WithPriority highest first,
// first in first out within one priority, counting a priority above max
// as max. Priority queues are classic queues — RabbitMQ refuses the
// argument on quorum queues — so combine it with
// WithQueueType(QueueClassic), WithDurable(false), WithExclusive or
// WithAutoDelete; a (default) quorum queue with it is a mistake Validate
// reports. max must be 1 to 255; RabbitMQ advises at most 10, since every
// level costs the broker memory and work. It applies to queues only.
func WithMaxPriority(max uint8) Option {
	return declare.Func(func(s *declare.Spec) { s.MaxPriority, s.MaxPrioSet = max, true })
}

// WithInitialGroupSize declares a quorum queue replicated on n nodes of
// the cluster (x-quorum-initial-group-size): one leader and n-1
// followers, placed by the broker. Without it RabbitMQ uses every node,
// up to its own limit. n is the size at declaration only: the broker does
// not add members when nodes join later (rabbitmq-queues grow does), and
// a queue that exists keeps its members (redeclaring it with another n is
// refused as a difference in arguments). A quorum queue stays available
// while a majority of its members runs: n = 3 survives one node lost, 5
// two. It applies to quorum queues only (the default type of durable
// queues); n must be at least 1.
func WithInitialGroupSize(n int) Option {
	return declare.Func(func(s *declare.Spec) { s.GroupSize, s.GroupSizeSet = n, true })
}
