package acemq

import (
	"errors"
	"fmt"
	"sync"
)

// ErrRetryPolicyMismatch is wrapped by the error of a Consume given a retry
// policy (WithRetry) other than the one its queue was declared with
// (Topology.Queue with WithRetry, applied on the same connection or given
// with WithTopology).
var ErrRetryPolicyMismatch = errors.New("its retry policy differs from its queue's")

// declaredPolicies are the retry policies queues were declared with by the
// topologies applied on one connection, so that a consumer of such a queue
// takes that policy, or is refused when given another.
type declaredPolicies struct {
	mu sync.Mutex
	m  map[string]RetryPolicy
}

// remember records the policies of a topology just applied; a later
// topology's policy for a queue replaces an earlier one.
func (d *declaredPolicies) remember(ps map[string]RetryPolicy) {
	if len(ps) == 0 {
		return
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if d.m == nil {
		d.m = make(map[string]RetryPolicy, len(ps))
	}
	for q, p := range ps {
		d.m[q] = p
	}
}

// forget drops the policies of queues a topology deleted.
func (d *declaredPolicies) forget(ps map[string]RetryPolicy) {
	d.mu.Lock()
	defer d.mu.Unlock()
	for q := range ps {
		delete(d.m, q)
	}
}

func (d *declaredPolicies) lookup(q string) (RetryPolicy, bool) {
	d.mu.Lock()
	defer d.mu.Unlock()
	p, ok := d.m[q]
	return p, ok
}

// queuePolicy is the policy queue was declared with: by the last of the
// topologies a consumer is given that declares it with WithRetry, else by
// the last topology applied on c that did.
func queuePolicy(c *Conn, topologies []*Topology, queue string) (RetryPolicy, bool) {
	for i := len(topologies) - 1; i >= 0; i-- {
		if t := topologies[i]; t != nil {
			if p, ok := t.policies[queue]; ok {
				return p, true
			}
		}
	}
	return c.declared.lookup(queue)
}

// consumerPolicy settles a consumer's retry policy against its queue's: a
// consumer given none takes the queue's; one given another is refused,
// naming both.
func consumerPolicy(c *Conn, cfg *consumeConfig, queue string) error {
	declared, ok := queuePolicy(c, cfg.topology, queue)
	switch {
	case !ok:
	case !cfg.retrySet:
		cfg.retry, cfg.retrySet = declared, true
	case cfg.retry.orDefault() != declared:
		return fmt.Errorf("acemq: the consumer of %q: %w: WithRetry(%s) on Consume, WithRetry(%s) on the queue's Topology.Queue, which declared its rungs; give both the same policy, or drop Consume's WithRetry to take the queue's",
			queue, ErrRetryPolicyMismatch, cfg.retry, declared)
	}
	return nil
}
