package acemq

import (
	"fmt"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
)

// argInitialGroupSize is the RabbitMQ queue argument that sets how many
// cluster nodes a new quorum queue is replicated on.
const argInitialGroupSize = "x-quorum-initial-group-size"

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
func WithInitialGroupSize(n int) DeclareOption {
	return declareOption(func(s *declareSpec) { s.groupSize, s.groupSizeSet = n, true })
}

// applyGroupSize adds WithInitialGroupSize's argument to q, whose type
// resolveQueue has decided, or says why it cannot.
func applyGroupSize(q driver.Queue, s declareSpec) (driver.Queue, error) {
	if !s.groupSizeSet {
		return q, nil
	}
	if s.groupSize < 1 {
		return q, fmt.Errorf("the queue %q: WithInitialGroupSize(%d): a quorum queue needs at least one member; give the number of nodes to replicate it on, for example 3", q.Name, s.groupSize)
	}
	if t, _ := q.Args[argQueueType].(string); t != string(QueueQuorum) {
		if t == "" {
			t = string(QueueClassic)
		}
		return q, fmt.Errorf("the queue %q is a %s queue: WithInitialGroupSize applies to quorum queues only; drop the option, or make the queue durable, not exclusive and not auto-delete (a quorum queue)", q.Name, t)
	}
	if v, ok := q.Args[argInitialGroupSize]; ok {
		if n, isInt := wire.Integer(v); !isInt || n != int64(s.groupSize) {
			return q, fmt.Errorf("the queue %q sets %s to %v in its arguments and WithInitialGroupSize(%d): drop one", q.Name, argInitialGroupSize, v, s.groupSize)
		}
	}
	q.Args[argInitialGroupSize] = int64(s.groupSize)
	return q, nil
}
