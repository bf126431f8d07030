package acemq

import (
	"fmt"
	"maps"

	"github.com/acemq/acemq/driver"
)

// argMaxPriority is the queue argument of a priority queue.
const argMaxPriority = "x-max-priority"

// withMaxPriority returns the queue's arguments with WithMaxPriority's
// x-max-priority added, refusing a maximum of 0 and a second maximum given
// in WithArguments.
func withMaxPriority(name string, s declareSpec) (driver.Table, error) {
	if !s.maxPrioSet {
		return s.args, nil
	}
	if s.maxPrio == 0 {
		return nil, fmt.Errorf("the queue %q: WithMaxPriority(0) makes no priority queue; give a maximum from 1 to 255 (RabbitMQ advises at most 10) or drop the option", name)
	}
	if _, ok := s.args[argMaxPriority]; ok {
		return nil, fmt.Errorf("the queue %q sets %s in WithArguments and with WithMaxPriority: drop one", name, argMaxPriority)
	}
	args := maps.Clone(s.args)
	if args == nil {
		args = driver.Table{}
	}
	args[argMaxPriority] = int32(s.maxPrio)
	return args, nil
}

// priorityNeedsClassic refuses a priority queue that resolved to a quorum
// (or stream) queue: RabbitMQ refuses x-max-priority on them.
func priorityNeedsClassic(q driver.Queue, s declareSpec) error {
	if !s.maxPrioSet {
		return nil
	}
	if typ := queueType(q.Args); typ != string(QueueClassic) {
		return fmt.Errorf("the queue %q would be a %s queue with WithMaxPriority, which RabbitMQ refuses: priority queues are classic; add WithQueueType(acemq.QueueClassic)", q.Name, typ)
	}
	return nil
}
