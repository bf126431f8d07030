package memory

import (
	"fmt"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
)

// Quorum queues' delivery limit, as RabbitMQ 4.3 (the newest the library
// is proven on) has it. Every quorum queue has one: x-delivery-limit when
// declared (a negative value means none), else 20, RabbitMQ 4's default.
// A message returned to its queue as failed counts one delivery: a
// requeued reject, and every unsettled delivery of a subscription or
// connection that closes. A requeued nack says the message was not
// processed and does not count (RabbitMQ 4.0 to 4.2 counted it too). A
// message returned once more than the limit is dead-lettered with the
// reason "delivery_limit" or, on a queue without a dead-letter exchange,
// dropped. Deliveries from a quorum queue carry x-delivery-count (the
// failed deliveries, when there were any) and x-acquired-count (every
// return, when there was one), as RabbitMQ 4.3 writes them. Classic
// queues have no delivery limit.

// defaultDeliveryLimit is RabbitMQ 4's delivery limit of a quorum queue
// declared without x-delivery-limit.
const defaultDeliveryLimit = 20

// parseDeliveryLimit reads x-delivery-limit into q, a quorum queue.
func parseDeliveryLimit(q *queue, args driver.Table, invalid func(arg, why string) error) error {
	q.quorum = true
	q.deliveryLimit = defaultDeliveryLimit
	v, ok := args["x-delivery-limit"]
	if !ok {
		return nil
	}
	n, isInt := wire.Integer(v)
	if !isInt {
		return invalid("x-delivery-limit", fmt.Sprintf("{unacceptable_type,%s}", typeName(v)))
	}
	if n < 0 {
		n = -1
	}
	q.deliveryLimit = n
	return nil
}

// returnKind is how a delivery goes back to its queue.
type returnKind int

const (
	returnNotProcessed returnKind = iota // a requeued nack
	returnFailed                         // a requeued reject, or its channel closed
)

// giveBack returns a delivered message to q, counting the return, and
// dead-letters (or drops) it instead when a failed return takes it over
// q's delivery limit.
func (b *broker) giveBack(q *queue, m *message, how returnKind) {
	if q.deleted || q.stream != nil {
		return
	}
	if q.quorum {
		m.acquired++
		if how == returnFailed {
			m.failed++
		}
		if q.deliveryLimit >= 0 && m.failed > q.deliveryLimit {
			b.deadLetter(q, m, "delivery_limit")
			return
		}
	}
	b.requeue(q, m)
}

// countHeaders adds a quorum queue's delivery counters to the headers of a
// delivery of m.
func (m *message) countHeaders(h driver.Table) driver.Table {
	if m.failed == 0 && m.acquired == 0 {
		return h
	}
	if h == nil {
		h = driver.Table{}
	}
	if m.failed > 0 {
		h["x-delivery-count"] = m.failed
	}
	if m.acquired > 0 {
		h["x-acquired-count"] = m.acquired
	}
	return h
}
