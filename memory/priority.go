package memory

import (
	"fmt"
	"sort"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
)

// Priority queues, as RabbitMQ's classic queues have them: a queue declared
// with x-max-priority N (1 to 255) delivers its ready messages highest
// priority first, first in first out within one priority. A message's
// priority is capped at N for ordering (it is delivered with the priority
// it was published with); a message without one counts as 0. A queue
// without the argument ignores priorities. Quorum queues refuse the
// argument, as RabbitMQ 3.10 does.

// parseMaxPriority reads x-max-priority into q, refusing what RabbitMQ
// refuses.
func parseMaxPriority(q *queue, name, qtype string, args driver.Table, invalid func(arg, why string) error) error {
	v, ok := args["x-max-priority"]
	if !ok {
		return nil
	}
	if qtype != "classic" {
		return &driver.PreconditionError{Kind: "queue", Name: name,
			Detail: fmt.Sprintf("invalid arg 'x-max-priority' for queue '%s' in vhost '/' of queue type rabbit_%s_queue", name, qtype)}
	}
	n, isInt := wire.Integer(v)
	switch {
	case !isInt:
		return invalid("x-max-priority", fmt.Sprintf("\"expected integer, got %s\"", typeName(v)))
	case n < 0:
		return invalid("x-max-priority", fmt.Sprintf("{value_negative,%d}", n))
	case n > 255:
		return invalid("x-max-priority", fmt.Sprintf("{max_value_exceeded,%d}", n))
	}
	q.maxPriority = uint8(n)
	return nil
}

// rank is m's priority for ordering on q.
func (q *queue) rank(m *message) uint8 {
	return min(m.priority, q.maxPriority)
}

// before reports whether a is delivered before b on q: higher rank first,
// then publish order.
func (q *queue) before(a, b *message) bool {
	if ra, rb := q.rank(a), q.rank(b); ra != rb {
		return ra > rb
	}
	return a.seq < b.seq
}

// position is where m goes among q's ready messages: after every message
// delivered before it. A new message on a queue without priorities goes at
// the end; a requeued one near where it was.
func (q *queue) position(m *message) int {
	n := len(q.msgs)
	if n == 0 || q.before(q.msgs[n-1], m) {
		return n
	}
	return sort.Search(n, func(i int) bool { return q.before(m, q.msgs[i]) })
}
