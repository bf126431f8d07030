package inbox

import (
	"time"

	"github.com/acemq/acemq"
)

// An Option configures New. Every option is a function named With…, as
// across the module.
type Option interface{ apply(*config) }

type config struct {
	lease      time.Duration
	retention  time.Duration
	pruneEvery time.Duration
	delay      time.Duration
	key        func(acemq.Envelope) string
	onError    func(error)
}

type option func(*config)

func (f option) apply(c *config) { f(c) }

// Defaults of New (docs/wire.md §12).
const (
	DefaultLease      = 5 * time.Minute
	DefaultPruneEvery = 10 * time.Minute
	// DefaultRetention is the SQL stores' default: how long a
	// confirmation is kept, so how late a duplicate is still recognised.
	DefaultRetention = 7 * 24 * time.Hour
)

// WithLease sets how long a claim holds a key before another worker may
// take it over (default 5 min). Make it longer than the handler's slowest
// run: a handler still running when its lease ends can be run a second
// time elsewhere (with WrapTx, only one of the two commits).
func WithLease(d time.Duration) Option { return option(func(c *config) { c.lease = d }) }

// WithRetention sets how long a confirmation is kept (default: the
// store's, 1 h for the memory store, 7 days for the SQL stores). A
// duplicate arriving later than that runs the handler again.
func WithRetention(d time.Duration) Option { return option(func(c *config) { c.retention = d }) }

// WithPruneEvery sets how often the inbox deletes expired claims and
// confirmations older than the retention (default every 10 min, by the
// first handler call after the interval, in its goroutine). 0 turns it
// off: call Inbox.Prune yourself.
func WithPruneEvery(d time.Duration) Option { return option(func(c *config) { c.pruneEvery = d }) }

// WithInProgressDelay sets the wait before a message whose key another
// worker holds is tried again (default 5 s, as acemq.InProgress waits).
func WithInProgressDelay(d time.Duration) Option { return option(func(c *config) { c.delay = d }) }

// WithKey sets the function that gives a message's idempotency key
// (default: the envelope id, which the family keeps across retries,
// dead-letters, replays and outbox republishes). An empty key runs the
// handler without the inbox.
func WithKey(f func(acemq.Envelope) string) Option { return option(func(c *config) { c.key = f }) }

// WithOnError calls f with failures the inbox works around (a release or
// a prune that failed, a confirmation that failed after a plain handler's
// work was done).
func WithOnError(f func(error)) Option { return option(func(c *config) { c.onError = f }) }
