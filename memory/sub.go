package memory

import (
	"context"
	"fmt"
	"maps"
	"slices"

	"github.com/acemq/acemq/driver"
)

// sub is a consumer: the memory equivalent of a channel with one
// basic.consume on it. Its state is guarded by broker.mu; one goroutine per
// subscription hands deliveries up without holding the lock.
type sub struct {
	b        *broker
	c        *conn
	q        *queue
	tag      string
	prefetch int

	ch     chan driver.Delivery
	wake   chan struct{} // capacity 1: "state changed"
	done   chan struct{} // closed by Close
	exited chan struct{} // closed when run returns

	nextTag   uint64
	unacked   map[uint64]*unacked // every unsettled delivery, pending included
	pending   []*unacked          // assigned but not yet handed up, in order
	exclusive bool
	cancelled bool // no new deliveries
	closed    bool // channel gone: nothing can be settled
}

var _ driver.Subscription = (*sub)(nil)

func (s *sub) hasRoom() bool {
	return s.prefetch == 0 || len(s.unacked) < s.prefetch
}

// assign gives m to s as a new unacknowledged delivery.
func (s *sub) assign(q *queue, m *message) {
	s.nextTag++
	u := &unacked{tag: s.nextTag, m: m, q: q}
	s.unacked[u.tag] = u
	s.pending = append(s.pending, u)
	s.signal()
}

func (s *sub) signal() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// serverCancel ends the subscription from the broker's side (its queue was
// deleted): no new deliveries; those already assigned are still handed up.
func (s *sub) serverCancel() {
	s.cancelled = true
	s.signal()
}

// run hands pending deliveries up, in order, until the subscription is
// cancelled and drained or closed.
func (s *sub) run() {
	defer close(s.exited)
	defer close(s.ch)
	b := s.b
	for {
		b.mu.Lock()
		if s.closed {
			b.mu.Unlock()
			return
		}
		if len(s.pending) == 0 {
			cancelled := s.cancelled
			b.mu.Unlock()
			if cancelled {
				return
			}
			select {
			case <-s.wake:
			case <-s.done:
				return
			}
			continue
		}
		u := s.pending[0]
		d := u.m.delivery()
		d.ConsumerTag = s.tag
		d.DeliveryTag = u.tag
		d.Acknowledger = s
		b.mu.Unlock()

		select {
		case s.ch <- d:
			b.mu.Lock()
			if !s.closed && len(s.pending) > 0 && s.pending[0] == u {
				s.pending[0] = nil
				s.pending = s.pending[1:]
			}
			b.mu.Unlock()
		case <-s.done:
			return
		}
	}
}

// Deliveries returns the channel deliveries arrive on. It is closed after
// Cancel (once everything already assigned has been handed up), Close, the
// queue's deletion or the connection's Close.
func (s *sub) Deliveries() <-chan driver.Delivery { return s.ch }

// Receive returns the next delivery, or false once Deliveries has closed
// (driver.Receiver). The memory broker hands deliveries up through the same
// channel either way.
func (s *sub) Receive() (driver.Delivery, bool) {
	d, ok := <-s.ch
	return d, ok
}

// Tag returns the consumer tag.
func (s *sub) Tag() string { return s.tag }

// Cancel stops new deliveries. Deliveries already handed up, and those
// assigned but not yet handed up, can still be settled.
func (s *sub) Cancel(ctx context.Context) error {
	if err := ctxErr(ctx, "cancel consumer "+s.tag); err != nil {
		return err
	}
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.cancelled {
		return nil
	}
	s.cancelled = true
	b.removeConsumer(s)
	s.signal()
	return nil
}

// Close cancels the subscription, puts every unsettled delivery back on the
// queue marked redelivered, and returns once the Deliveries channel is
// closed.
func (s *sub) Close() error {
	b := s.b
	b.mu.Lock()
	b.closeSub(s)
	delete(s.c.subs, s)
	b.mu.Unlock()
	<-s.exited
	return nil
}

// closeSub closes s under the broker lock; the caller waits for s.exited
// after unlocking.
func (b *broker) closeSub(s *sub) {
	if s.closed {
		return
	}
	s.closed = true
	if !s.cancelled {
		s.cancelled = true
		b.removeConsumer(s)
	}
	b.requeueAll(s.unacked)
	s.unacked = nil
	s.pending = nil
	close(s.done)
}

// requeueAll puts unsettled deliveries back on their queues in tag order and
// lets the queues deliver them again. Their channel closed with them
// unsettled: each counts as a failed delivery (limit.go).
func (b *broker) requeueAll(set map[uint64]*unacked) {
	touched := map[*queue]bool{}
	for _, tag := range slices.Sorted(maps.Keys(set)) {
		u := set[tag]
		b.giveBack(u.q, u.m, returnFailed)
		touched[u.q] = true
	}
	for q := range touched {
		b.dispatch(q)
	}
}

// Ack acknowledges a delivery of this subscription.
func (s *sub) Ack(tag uint64) error { return s.settle(tag, settleAck) }

// Nack returns a delivery of this subscription as not processed.
func (s *sub) Nack(tag uint64, requeue bool) error {
	if requeue {
		return s.settle(tag, settleRequeue)
	}
	return s.settle(tag, settleDiscard)
}

// Reject returns a delivery of this subscription as failed.
func (s *sub) Reject(tag uint64, requeue bool) error {
	if requeue {
		return s.settle(tag, settleRejectRequeue)
	}
	return s.settle(tag, settleRejectDiscard)
}

func (s *sub) settle(tag uint64, how settleKind) error {
	b := s.b
	b.mu.Lock()
	defer b.mu.Unlock()
	if s.closed {
		return fmt.Errorf("memory: %s of delivery %d on consumer %q: %w", how, tag, s.tag, driver.ErrChannelClosed)
	}
	if s.q.stream != nil && how != settleAck {
		return b.streamRefused(s, how)
	}
	u, ok := s.unacked[tag]
	if !ok {
		return unknownTag(how, tag)
	}
	delete(s.unacked, tag)
	if i := slices.Index(s.pending, u); i >= 0 {
		s.pending = slices.Delete(s.pending, i, i+1)
	}
	b.settle(u, how)
	return nil
}

type settleKind int

const (
	settleAck           settleKind = iota
	settleRequeue                  // basic.nack, requeue
	settleDiscard                  // basic.nack, no requeue
	settleRejectRequeue            // basic.reject, requeue
	settleRejectDiscard            // basic.reject, no requeue
)

func (k settleKind) String() string {
	switch k {
	case settleAck:
		return "ack"
	case settleRequeue:
		return "nack (requeue)"
	case settleDiscard:
		return "nack"
	case settleRejectRequeue:
		return "reject (requeue)"
	default:
		return "reject"
	}
}

func unknownTag(how settleKind, tag uint64) error {
	return fmt.Errorf("memory: %s: 406 PRECONDITION_FAILED - unknown delivery tag %d (already settled?)", how, tag)
}

// settle applies a settlement to a delivery already removed from its
// unacked set.
func (b *broker) settle(u *unacked, how settleKind) {
	switch how {
	case settleRequeue:
		b.giveBack(u.q, u.m, returnNotProcessed)
	case settleRejectRequeue:
		b.giveBack(u.q, u.m, returnFailed)
	case settleDiscard, settleRejectDiscard:
		if !u.q.deleted {
			b.deadLetter(u.q, u.m, "rejected")
		}
	}
	b.dispatch(u.q)
}
