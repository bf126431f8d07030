package schedule

import "github.com/acemq/acemq"

// The package's options follow the module's rule: every option is a
// function named With…, returning one of the option interfaces below.

// A PublisherOption configures NewPublisher.
type PublisherOption interface{ applyPublisher(*publisherConfig) }

// A SendOption configures one SendAt or SendAfter.
type SendOption interface{ applySend(*sendConfig) }

// A ServeOption configures Serve.
type ServeOption interface{ applyServe(*serveConfig) }

type publisherConfig struct {
	codec  acemq.Codec
	ladder ladder
}

type sendConfig struct{ env acemq.Envelope }

type serveConfig struct {
	concurrency int
	ladder      ladder
}

type publisherOption func(*publisherConfig)

func (f publisherOption) applyPublisher(c *publisherConfig) { f(c) }

type sendOption func(*sendConfig)

func (f sendOption) applySend(c *sendConfig) { f(c) }

type serveOption func(*serveConfig)

func (f serveOption) applyServe(c *serveConfig) { f(c) }

// WithCodec chooses the codec the payload is encoded with once, when it is
// scheduled (default JSON). Its content type travels with the bytes and is
// the delivered message's.
func WithCodec(c acemq.Codec) PublisherOption {
	return publisherOption(func(p *publisherConfig) { p.codec = c })
}

// WithEnvelope schedules the message with env (built with
// acemq.NewEnvelope, or a delivered message's envelope derived with
// Envelope.Derive) instead of a fresh one: its id, correlation and
// causation are the delivered message's. Unknown x-acemq-* headers a
// delivered envelope carries are not sent.
func WithEnvelope(env acemq.Envelope) SendOption {
	return sendOption(func(c *sendConfig) { c.env = env })
}

// WithConcurrency runs n hops and deliveries at once (default
// DefaultConcurrency). The prefetch stays ControlPrefetch (50), so more
// than 50 gains nothing.
func WithConcurrency(n int) ServeOption {
	return serveOption(func(c *serveConfig) { c.concurrency = n })
}

// DefaultConcurrency is the control consumer's default number of handlers:
// each hop is a confirmed publish, and the order in which due messages
// leave does not matter.
const DefaultConcurrency = 8
