package driver

import (
	"context"

	"github.com/acemq/acemq/internal/wire"
)

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
	// Priority is the AMQP priority, 0 to 255; 0 means none (a priority
	// queue treats it as 0). Only a queue declared with x-max-priority
	// orders by it, and it caps the value at its maximum for ordering.
	Priority uint8
	Headers  Table
	// HeaderSize, when above 0, is the encoded size of Headers as an AMQP
	// 0-9-1 field table, its 4-byte length prefix included, and says that
	// every value in Headers is a flat scalar a driver writes as it is (a
	// string, []byte, bool, int8 to int64 and uint8 to uint32, a finite
	// float, time.Time or nil) under a name of at most 255 bytes. The acemq
	// package sets it on the messages its publishers build, having added it
	// up while writing the headers, so that a driver need not walk the
	// table again; whoever changes Headers afterwards sets it to 0. 0 means
	// unknown: the driver checks and measures the table itself.
	HeaderSize int
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
	// Priority is the AMQP priority the message was published with (0 when
	// none), as published: a priority queue's cap is not applied to it.
	Priority uint8
	// ConsumerTag is empty for a message fetched with Get.
	ConsumerTag string
	DeliveryTag uint64

	// Acknowledger settles the delivery. It is set by the driver.
	Acknowledger Acknowledger

	// HeaderValue, when not nil, says that Headers is as the driver decoded
	// it, not converted: nested tables, arrays and decimals may still be in
	// the driver's own types, and HeaderValue returns a value's form in
	// this package's terms (a Table, a []any, a Decimal; other values as
	// they are). A driver sets it only on the deliveries of a subscription
	// whose ConsumeSpec asked for UnconvertedHeaders.
	HeaderValue func(any) any
}

// Ack acknowledges the delivery.
func (d *Delivery) Ack() error {
	if d.Acknowledger == nil {
		return ErrNotSettleable
	}
	return d.Acknowledger.Ack(d.DeliveryTag)
}

// Nack settles the delivery as not processed: the consumer did not run
// it (it was returned at a shutdown, a pause, or by a browser). It goes
// back on its queue when requeue is true and is dead-lettered or dropped
// (as the queue says) otherwise. See Acknowledger for what each costs
// against a quorum queue's delivery limit.
func (d *Delivery) Nack(requeue bool) error {
	if d.Acknowledger == nil {
		return ErrNotSettleable
	}
	return d.Acknowledger.Nack(d.DeliveryTag, requeue)
}

// Reject settles the delivery as failed: it was processed and the
// processing failed. It goes back on its queue when requeue is true and
// is dead-lettered or dropped (as the queue says) otherwise. See
// Acknowledger for what each costs against a quorum queue's delivery
// limit.
func (d *Delivery) Reject(requeue bool) error {
	if d.Acknowledger == nil {
		return ErrNotSettleable
	}
	return d.Acknowledger.Reject(d.DeliveryTag, requeue)
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
//
// Nack and Reject differ in intent, and a broker that counts failed
// deliveries against a limit (a RabbitMQ quorum queue's delivery limit)
// must be told which one it is given. Reject says that processing failed:
// a requeued rejection counts toward the limit on every broker. Nack says
// that the delivery was not processed: on RabbitMQ 4.3 and later a
// requeued nack does not count (it still did on 4.0 to 4.2 and 3.x, where
// every return counted). The RabbitMQ driver sends basic.reject and
// basic.nack; a driver whose broker draws no such line sends the same for
// both.
type Acknowledger interface {
	Ack(tag uint64) error
	// Nack returns the delivery as not processed.
	Nack(tag uint64, requeue bool) error
	// Reject returns the delivery as failed.
	Reject(tag uint64, requeue bool) error
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
	// Args are the consumer arguments of basic.consume: x-stream-offset
	// on a stream (docs/wire.md §5.9), x-priority, and so on.
	Args Table
	// Resume, when set, is called before every resubscription a driver
	// makes underneath the same Subscription after a lost channel or
	// connection; the arguments it returns replace Args from then on. A
	// stream reader uses it to carry on from the offset it has reached
	// instead of the one it started at. It must not block.
	Resume func() Table
	// UnconvertedHeaders lets the driver hand up each delivery's headers as
	// it decoded them, with Delivery.HeaderValue to convert a value, and so
	// spare a walk over every delivery's headers to find the values to
	// convert: the acemq consume engine reads every header once anyway and
	// converts what it keeps in that walk. A driver whose headers need no
	// conversion ignores it.
	UnconvertedHeaders bool
}

// StreamOffsetHeader is the header on a delivery from a stream that holds
// its offset, an int64 from 0 (docs/wire.md §5.9). Both drivers put it on
// every delivery of a stream, as RabbitMQ does.
const StreamOffsetHeader = "x-stream-offset"

// StreamOffset returns the delivery's stream offset and true, or false
// for a delivery that did not come from a stream.
func (d *Delivery) StreamOffset() (int64, bool) {
	return wire.Integer(d.Headers[StreamOffsetHeader])
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
	// yet settled go back to the queue marked redelivered. It may be
	// called while a Cancel whose context ended is still waiting for the
	// broker, and must not hang then; Conn.Close ends it.
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
