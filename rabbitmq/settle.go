package rabbitmq

import (
	"context"
	"errors"
	"fmt"

	"github.com/acemq/acemq/driver"
	amqp "github.com/rabbitmq/amqp091-go"
)

// acker settles the deliveries of one amqp091 channel of session s. A
// delivery can be settled only while its channel is open on a live
// connection. Once the channel is closed, the connection is closed or the
// supervisor has marked the session lost, CanSettle answers false and Ack,
// Nack and Reject fail with an error wrapping driver.ErrChannelClosed without
// sending anything: the broker redelivers the message.
//
// The connection and session checks are what make the guarantee hold that
// EventLost is emitted only after every delivery of the session reports it
// cannot be settled. amqp091 marks a lost connection closed before it tells
// the connection's NotifyClose listeners (the supervisor), but marks the
// connection's channels closed only afterwards, one by one, so the
// channel's flag alone may still say open when EventLost is emitted.
//
// The checks are atomic loads: CanSettle, Ack, Nack and Reject run per message.
//
// The acker of a subscription's channel coalesces its acks (co, see
// coalescer): Ack records the ack, which goes out with others in one
// basic.ack with multiple set. The acker of the Get channel sends each
// settlement at once (co is nil).
type acker struct {
	s  *session
	ch *amqp.Channel
	co *coalescer
}

// newAcker returns the acker of ch, a channel of s, coalescing up to batch
// acks (none when batch is below 2).
func newAcker(s *session, ch *amqp.Channel, batch int) *acker {
	a := &acker{s: s, ch: ch}
	if batch > 1 {
		a.co = newCoalescer(batch, ch.Ack)
	}
	return a
}

var errSessionLost = errors.New("the connection was closed")

// gone returns why the deliveries cannot be settled any more, or nil while
// they can.
func (a *acker) gone() error {
	switch {
	case a.s.lost.Load() || a.s.ac.IsClosed():
		return errSessionLost
	case a.ch.IsClosed():
		return amqp.ErrClosed // what amqp091 answers on a closed channel
	}
	return nil
}

// Ack acknowledges the delivery with the tag.
func (a *acker) Ack(tag uint64) error {
	if err := a.gone(); err != nil {
		return settleError(tag, err)
	}
	var err error
	if a.co != nil {
		err = a.co.ack(tag)
	} else {
		err = a.ch.Ack(tag, false)
	}
	if err != nil {
		return settleError(tag, err)
	}
	return nil
}

// settle runs send, a nack or reject of tag, after the acks waiting on the
// channel have gone out.
func (a *acker) settle(tag uint64, send func() error) error {
	if err := a.gone(); err != nil {
		return settleError(tag, err)
	}
	var err error
	if a.co != nil {
		err = a.co.settle(tag, send)
	} else {
		err = send()
	}
	if err != nil {
		return settleError(tag, err)
	}
	return nil
}

// flush sends the acks waiting on the channel, if any.
func (a *acker) flush() {
	if a.co != nil && a.co.pending.Load() {
		_ = a.co.flush()
	}
}

// CanSettle reports whether the delivery can still be settled: its channel
// is open and its session has not been lost. It answers false before
// EventLost reports the loss of the session.
func (a *acker) CanSettle(uint64) bool { return a.gone() == nil }

// Nack returns the delivery with the tag as not processed: basic.nack,
// which RabbitMQ 4.3 and later do not count toward a quorum queue's
// delivery limit.
func (a *acker) Nack(tag uint64, requeue bool) error {
	return a.settle(tag, func() error { return a.ch.Nack(tag, false, requeue) })
}

// Reject returns the delivery with the tag as failed: basic.reject, which
// every RabbitMQ version counts toward a quorum queue's delivery limit.
func (a *acker) Reject(tag uint64, requeue bool) error {
	return a.settle(tag, func() error { return a.ch.Reject(tag, requeue) })
}

func settleError(tag uint64, err error) error {
	return fmt.Errorf("rabbitmq: delivery %d cannot be settled, the broker will redeliver it (%v): %w", tag, err, driver.ErrChannelClosed)
}

// toDelivery is the driver's form of d, settled through a. With
// unconverted true (ConsumeSpec.UnconvertedHeaders) the headers are
// amqp091's table as it is, and the delivery's HeaderValue converts a value
// of it (fromAMQPValue): no walk over the table here.
func toDelivery(d *amqp.Delivery, a *acker, unconverted bool) driver.Delivery {
	var dd driver.Delivery
	fillDelivery(&dd, d, a, unconverted)
	return dd
}

// fillDelivery sets the fields of dd, a zero delivery, to toDelivery(d, a,
// unconverted), one by one: building the delivery aside and copying it in
// would copy every delivery once more.
func fillDelivery(dd *driver.Delivery, d *amqp.Delivery, a *acker, unconverted bool) {
	dd.Exchange = d.Exchange
	dd.RoutingKey = d.RoutingKey
	dd.ContentType = d.ContentType
	dd.MessageID = d.MessageId
	dd.CorrelationID = d.CorrelationId
	dd.ReplyTo = d.ReplyTo
	dd.Persistent = d.DeliveryMode == amqp.Persistent
	dd.Redelivered = d.Redelivered
	dd.Body = d.Body
	dd.Priority = d.Priority
	dd.ConsumerTag = d.ConsumerTag
	dd.DeliveryTag = d.DeliveryTag
	dd.Acknowledger = a
	if unconverted {
		dd.Headers, dd.HeaderValue = driver.Table(d.Headers), fromAMQPValue
	} else {
		dd.Headers = fromAMQPTable(d.Headers)
	}
}

// Get fetches one message with basic.get on the session's Get channel. The
// delivery stays settleable while that channel and its session live (see
// acker); a Get error that closes the channel (a missing queue) makes
// earlier unsettled Get deliveries unsettleable, and the broker redelivers
// them.
func (c *conn) Get(ctx context.Context, queue string) (driver.Delivery, bool, error) {
	for {
		s, err := c.waitSession(ctx, nil)
		if err != nil {
			return driver.Delivery{}, false, err
		}
		var (
			d   amqp.Delivery
			ok  bool
			ack *acker
		)
		err = c.do(ctx, func() error {
			s.getMu.Lock()
			defer s.getMu.Unlock()
			if s.getCh == nil || s.getCh.IsClosed() {
				ch, err := s.ac.Channel()
				if err != nil {
					return err
				}
				s.getCh, s.getAk = ch, newAcker(s, ch, 0)
			}
			ack = s.getAk
			var err error
			d, ok, err = s.getCh.Get(queue, false)
			return err
		}, func() {
			if ok {
				_ = ack.Nack(d.DeliveryTag, true)
			}
		})
		if err != nil {
			if connectionLost(s, err) && !c.isClosing() && ctx.Err() == nil {
				continue
			}
			return driver.Delivery{}, false, mapErr("get from", "queue", queue, err)
		}
		if !ok {
			return driver.Delivery{}, false, nil
		}
		dd := toDelivery(&d, ack, false)
		dd.ConsumerTag = ""
		return dd, true, nil
	}
}
