package memory

import (
	"fmt"

	"github.com/acemq/acemq/driver"
)

// Single active consumer (x-single-active-consumer=true on a classic or
// quorum queue), as RabbitMQ does it: of the queue's consumers only the
// first registered receives messages; the others stand by, in the order
// they subscribed. When the active one goes (cancelled, its channel or
// connection closed), the next in line becomes active and receives, in
// queue order, what the old one left unsettled (requeued, marked
// redelivered) before anything newer. Consumers are never given messages
// round-robin.

// implementedArg reports whether the memory broker implements the queue
// argument a for a queue of type qtype.
func implementedArg(qtype, a string) bool {
	switch a {
	case "x-single-active-consumer":
		return qtype != "stream"
	case "x-delivery-limit":
		return qtype == "quorum"
	case "x-max-age", "x-max-length-bytes", "x-stream-max-segment-size-bytes":
		return qtype == "stream"
	}
	return false
}

// parseSingleActive reads x-single-active-consumer into nq.
func parseSingleActive(name string, q driver.Queue, nq *queue) error {
	v, ok := q.Args["x-single-active-consumer"]
	if !ok {
		return nil
	}
	on, isBool := v.(bool)
	if !isBool {
		return &driver.PreconditionError{Kind: "queue", Name: name, Detail: fmt.Sprintf(
			"invalid arg 'x-single-active-consumer' for queue '%s' in vhost '/': {unacceptable_type,%s}", name, typeName(v))}
	}
	nq.singleActive = on
	return nil
}

// activeConsumer is the consumer of a single-active-consumer queue that may
// receive now: the first registered, when it has room.
func (q *queue) activeConsumer() *sub {
	if len(q.consumers) == 0 || !q.consumers[0].hasRoom() {
		return nil
	}
	return q.consumers[0]
}
