package replay

import (
	"time"

	"github.com/acemq/acemq"
)

// An Option configures Run. Every option is a function named With….
type Option interface{ apply(*config) }

type config struct {
	exchange, routingKey string
	targetSet            bool
	limit                int
	filter               func(acemq.Envelope) bool
	messageFilter        func(acemq.Message[[]byte]) bool
	keepAttempts         bool
	now                  func() time.Time
}

type option func(*config)

func (f option) apply(c *config) { f(c) }

// WithTarget publishes the moved messages to exchange with routingKey
// instead of to the source's queue through the default exchange
// (WithTarget("", q) sends them to the queue q).
func WithTarget(exchange, routingKey string) Option {
	return option(func(c *config) { c.exchange, c.routingKey, c.targetSet = exchange, routingKey, true })
}

// WithLimit stops the replay after n messages have been moved (0, the
// default, means no limit). n must not be negative.
func WithLimit(n int) Option { return option(func(c *config) { c.limit = n }) }

// WithFilter moves only the messages for which keep returns true; the
// others are held until the replay ends and then put back on the source.
func WithFilter(keep func(env acemq.Envelope) bool) Option {
	return option(func(c *config) { c.filter = keep })
}

// WithKeptAttempts keeps each message's x-acemq-attempt instead of
// resetting it to 1, so a message that exhausted its attempts is
// dead-lettered again at its first failure.
func WithKeptAttempts() Option { return option(func(c *config) { c.keepAttempts = true }) }

// WithMessageFilter moves only the messages for which keep returns true,
// seeing each whole (body and content type included, as fetched); the
// others are held until the replay ends and then put back on the source,
// like WithFilter's. Both filters may be given; a message moves when both
// keep it. The acemq CLI's replay --keyring uses it to leave on the source
// every encrypted body its keyring cannot open.
func WithMessageFilter(keep func(m acemq.Message[[]byte]) bool) Option {
	return option(func(c *config) { c.messageFilter = keep })
}
