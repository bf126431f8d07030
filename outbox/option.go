package outbox

import (
	"time"

	"github.com/acemq/acemq"
)

// A PublisherOption configures NewPublisher. Every option is a function
// named With…, as across the module.
type PublisherOption interface{ applyPublisher(*publisherConfig) }

type publisherConfig struct {
	codec      acemq.Codec
	mandatory  bool
	persistent bool
}

type publisherOption func(*publisherConfig)

func (f publisherOption) applyPublisher(c *publisherConfig) { f(c) }

// WithCodec sets the codec that encodes payloads (default acemq.JSON). The
// record keeps the encoded bytes and the codec's content type.
func WithCodec(c acemq.Codec) PublisherOption {
	return publisherOption(func(p *publisherConfig) { p.codec = c })
}

// WithMandatory(false) lets the relay publish records nothing routes
// without failing them (default true: an unroutable record is a failed
// attempt, retried and eventually retired).
func WithMandatory(on bool) PublisherOption {
	return publisherOption(func(p *publisherConfig) { p.mandatory = on })
}

// WithPersistent(false) publishes records with delivery mode 1 (default
// persistent).
func WithPersistent(on bool) PublisherOption {
	return publisherOption(func(p *publisherConfig) { p.persistent = on })
}

// A SendOption configures one Send.
type SendOption interface{ applySend(*sendConfig) }

type sendConfig struct{ env acemq.Envelope }

type sendOption func(*sendConfig)

func (f sendOption) applySend(c *sendConfig) { f(c) }

// WithEnvelope records the message with env (its id, correlation,
// causation, type, application headers) instead of a fresh envelope.
func WithEnvelope(env acemq.Envelope) SendOption {
	return sendOption(func(c *sendConfig) { c.env = env })
}

// A RelayOption configures NewRelay.
type RelayOption interface{ applyRelay(*relayConfig) }

type relayConfig struct {
	interval    time.Duration
	batch       int
	maxAttempts int
	backoff     time.Duration
	maxBackoff  time.Duration
	notifier    Notifier
	noNotifier  bool
	onRetire    func(Record)
	onError     func(error)
}

type relayOption func(*relayConfig)

func (f relayOption) applyRelay(c *relayConfig) { f(c) }

// The relay's defaults (docs/wire.md §12).
const (
	DefaultInterval    = time.Second
	DefaultBatchSize   = 100
	DefaultMaxAttempts = 10
	DefaultBackoff     = time.Second
	DefaultMaxBackoff  = 5 * time.Minute
)

// WithInterval sets how often the relay polls the store (default 1 s).
// With a Notifier it polls too, as a safety net for a missed notification.
func WithInterval(d time.Duration) RelayOption {
	return relayOption(func(c *relayConfig) { c.interval = d })
}

// WithBatchSize sets how many records one pass takes (default 100).
func WithBatchSize(n int) RelayOption { return relayOption(func(c *relayConfig) { c.batch = n }) }

// WithMaxAttempts sets how many failed publishes retire a record (default
// 10).
func WithMaxAttempts(n int) RelayOption {
	return relayOption(func(c *relayConfig) { c.maxAttempts = n })
}

// WithBackoff sets the wait after a record's first failed publish and the
// most it grows to, doubling at each failure (defaults 1 s and 5 min).
func WithBackoff(first, most time.Duration) RelayOption {
	return relayOption(func(c *relayConfig) { c.backoff, c.maxBackoff = first, most })
}

// WithNotifier wakes the relay through n as records are stored (package
// outbox/pgnotify for PostgreSQL). A store that is itself a Notifier (the
// memory store) is used without this option; WithNotifier(nil) turns that
// off.
func WithNotifier(n Notifier) RelayOption {
	return relayOption(func(c *relayConfig) { c.notifier, c.noNotifier = n, n == nil })
}

// WithOnRetire calls f with each record the relay retires (as it decides
// to, just before the store records it), in addition to the metric and the
// span event. Keep f short: the batch's rows are locked while it runs.
func WithOnRetire(f func(Record)) RelayOption {
	return relayOption(func(c *relayConfig) { c.onRetire = f })
}

// WithOnError calls f with each failure of the store or the notifier the
// relay meets while it runs (it goes on: the next pass tries again).
// Failed publishes are not errors here: they are counted, retried and
// retired.
func WithOnError(f func(error)) RelayOption {
	return relayOption(func(c *relayConfig) { c.onError = f })
}
