package acemq

import (
	"errors"
	"fmt"

	"github.com/acemq/acemq/internal/declare"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// ErrRetryPolicyMismatch is wrapped by the error of a Consume given a retry
// policy (WithRetry) other than the one its queue was declared with
// (topology.Topology.Queue with WithRetry, applied on the same connection or given
// with WithTopology).
var ErrRetryPolicyMismatch = errors.New("its retry policy differs from its queue's")

// queuePolicy is the policy queue was declared with: by the last of the
// topologies a consumer is given that declares it with WithRetry, else by
// the last topology applied on c that did.
func queuePolicy(c *Conn, topologies []*topology.Topology, queue string) (retry.Policy, bool) {
	for i := len(topologies) - 1; i >= 0; i-- {
		if t := topologies[i]; t != nil {
			if r, ok := declare.RetriesOf(t).Lookup(queue); ok {
				return r.Policy.(retry.Policy), true
			}
		}
	}
	r, ok := c.eng.Declared().Lookup(queue)
	if !ok {
		return retry.Policy{}, false
	}
	return r.Policy.(retry.Policy), true
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
	case cfg.retry != declared:
		return fmt.Errorf("acemq: the consumer of %q: %w: WithRetry(%s) on Consume, WithRetry(%s) on the queue's Topology.Queue, which declared its rungs; give both the same policy, or drop Consume's WithRetry to take the queue's",
			queue, ErrRetryPolicyMismatch, cfg.retry, declared)
	}
	return nil
}
