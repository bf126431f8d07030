package engine

import "sync/atomic"

// Consumer is the state a consumer reports, for package acemqtest's
// WaitIdle: the queue it reads, how many deliveries it has taken up and
// not yet settled (handlers running and retries waiting in the consumer),
// how many of those wait on the connection's clock, and the rung queues of
// its retry policy.
type Consumer struct {
	queue     string
	rungs     []string
	unsettled atomic.Int64
	waiting   atomic.Int64
}

// NewConsumer returns the state of a consumer of queue whose policy waits
// on rungs.
func NewConsumer(queue string, rungs []string) *Consumer {
	return &Consumer{queue: queue, rungs: rungs}
}

// Queue is the queue the consumer reads.
func (c *Consumer) Queue() string { return c.queue }

// Rungs are the rung queues of the consumer's retry policy.
func (c *Consumer) Rungs() []string { return c.rungs }

// Unsettled is how many deliveries the consumer has taken up and not yet
// settled.
func (c *Consumer) Unsettled() int64 { return c.unsettled.Load() }

// AddUnsettled adds n (negative when deliveries are settled) to Unsettled.
func (c *Consumer) AddUnsettled(n int64) { c.unsettled.Add(n) }

// Waiting is how many of the unsettled deliveries wait in the consumer
// for a timer on the connection's clock that has not fired.
func (c *Consumer) Waiting() int64 { return c.waiting.Load() }

// AddWaiting adds n (negative when a timer fires or is stopped) to
// Waiting.
func (c *Consumer) AddWaiting(n int64) { c.waiting.Add(n) }

// ConsumerHandle lets a type that embeds it (an *acemq.Consumer) be found
// by ConsumerOf; like Handle, it adds nothing to the embedding type's API.
type ConsumerHandle struct{ c *Consumer }

// NewConsumerHandle returns the ConsumerHandle of c.
func NewConsumerHandle(c *Consumer) ConsumerHandle { return ConsumerHandle{c} }

func (h ConsumerHandle) engineConsumer() *Consumer { return h.c }

// ConsumerOf returns the state of c, an *acemq.Consumer (nil for anything
// else).
func ConsumerOf(c any) *Consumer {
	h, ok := c.(interface{ engineConsumer() *Consumer })
	if !ok || isNil(c) {
		return nil
	}
	return h.engineConsumer()
}
