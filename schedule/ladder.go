package schedule

import (
	"context"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/topology"
)

// The scheduler's names (docs/wire.md §5.7), shared by every language's
// scheduler on a broker.
const (
	// Exchange is the direct exchange the rungs and the control queue are
	// bound to, each on its own name.
	Exchange = "acemq.schedule"
	// DueQueue is the control queue: every rung dead-letters into it, and
	// the control consumer (Serve) reads it.
	DueQueue = "acemq.schedule.due"
	// ScheduledType is the x-acemq-type of a message between rungs.
	ScheduledType = "ScheduledMessage"
	// ControlPrefetch is the control consumer's prefetch.
	ControlPrefetch = 50
)

// The scheduler's headers on a message between rungs (docs/wire.md §3.2).
const (
	HeaderExchange    = wire.HeaderScheduleExchange    // target exchange
	HeaderRoutingKey  = wire.HeaderScheduleRoutingKey  // target routing key
	HeaderDueAt       = wire.HeaderScheduleDueAt       // due time, epoch ms
	HeaderContentType = wire.HeaderScheduleContentType // the payload's content type
	// HeaderType is this library's addition: the scheduled message's own
	// type, written only when the envelope set one. Other languages'
	// schedulers ignore it.
	HeaderType = wire.HeaderScheduleType
)

// octetStream is the content type of a message between rungs.
const octetStream = "application/octet-stream"

// rung is one waiting queue of a ladder.
type rung struct {
	name string
	ttl  time.Duration
}

// ladder is a scheduler's topology: an exchange, rungs longest first, a
// control queue. Applications always use the contract's (family); tests
// build shorter ones under names of their own.
type ladder struct {
	exchange string
	due      string
	rungs    []rung // longest first
	// hold is the rung a due message nothing routes waits on before it is
	// tried again.
	hold rung
}

// family is the contract's ladder: 1h, 10m, 1m, 10s and 1s.
var family = newLadder(Exchange, DueQueue, time.Minute, time.Hour, 10*time.Minute, time.Minute, 10*time.Second, time.Second)

// newLadder names rungs prefix.{delay} (docs/wire.md §5.2's rendering);
// ttls longest first; hold is one of them.
func newLadder(exchange, due string, hold time.Duration, ttls ...time.Duration) ladder {
	l := ladder{exchange: exchange, due: due}
	for _, d := range ttls {
		r := rung{name: exchange + "." + wire.FormatDelay(d), ttl: d}
		l.rungs = append(l.rungs, r)
		if d == hold {
			l.hold = r
		}
	}
	return l
}

// Rungs are the names of the scheduler's rung queues, longest first.
func Rungs() []string {
	out := make([]string, len(family.rungs))
	for i, r := range family.rungs {
		out[i] = r.name
	}
	return out
}

// next is the hop rule (docs/wire.md §5.7): with remaining until the due
// time, deliver when it is below the shortest rung, else wait on the
// longest rung whose time to live is at most remaining.
func (l ladder) next(remaining time.Duration) (r rung, hop bool) {
	for _, r := range l.rungs {
		if r.ttl <= remaining {
			return r, true
		}
	}
	return rung{}, false
}

// topology is the ladder's declarations: the exchange; every rung a
// durable classic queue with exactly x-message-ttl (milliseconds),
// x-dead-letter-exchange and x-dead-letter-routing-key, bound on its own
// name; the control queue a durable classic queue without arguments,
// bound on its own name.
func (l ladder) topology() *topology.Topology {
	t := topology.New().Exchange(l.exchange, topology.ExchangeDirect)
	for _, r := range l.rungs {
		t.Queue(r.name, topology.WithQueueType(topology.QueueClassic), topology.WithArguments(map[string]any{
			"x-message-ttl":             r.ttl.Milliseconds(),
			"x-dead-letter-exchange":    l.exchange,
			"x-dead-letter-routing-key": l.due,
		}))
		t.Bind(l.exchange, r.name, r.name)
	}
	t.Queue(l.due, topology.WithQueueType(topology.QueueClassic))
	t.Bind(l.exchange, l.due, l.due)
	return t
}

// Topology returns the scheduler's topology (docs/wire.md §5.7): the
// acemq.schedule exchange, the five rungs with their times to live and
// dead-letter arguments, and the acemq.schedule.due control queue, exactly
// as every language's scheduler declares them, so that they can share a
// broker. Apply it, print its Plan or check its Drift as any Topology.
func Topology() *topology.Topology { return family.topology() }

// Declare applies the scheduler's topology on conn. Serve and a
// Publisher's first scheduled send call it; call it yourself where
// applications lack configure permission and an operator declares.
func Declare(ctx context.Context, conn *acemq.Conn) error {
	if err := family.topology().Apply(ctx, conn); err != nil {
		return fmt.Errorf("schedule: declaring the scheduler's exchange and queues: %w", err)
	}
	return nil
}
