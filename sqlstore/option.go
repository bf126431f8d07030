package sqlstore

// An Option configures New. Every option is a function named With…, as
// across the module.
type Option interface{ apply(*Store) }

type option func(*Store)

func (f option) apply(s *Store) { f(s) }

// WithInboxTable names the inbox table (default acemq_inbox).
func WithInboxTable(name string) Option { return option(func(s *Store) { s.inbox = name }) }

// WithOutboxTable names the outbox table (default acemq_outbox).
func WithOutboxTable(name string) Option { return option(func(s *Store) { s.outbox = name }) }

// WithSagaTable names the saga log table (default acemq_saga).
func WithSagaTable(name string) Option { return option(func(s *Store) { s.saga = name }) }

// WithNotifyChannel names the PostgreSQL channel a recording notifies
// (default: the outbox table's name, a schema's dot replaced by _).
func WithNotifyChannel(name string) Option { return option(func(s *Store) { s.channel = name }) }

// WithNotify(false) stops the outbox's Add from calling pg_notify in the
// recording transaction on PostgreSQL (default on). PostgreSQL serialises
// the commits of transactions that NOTIFY: measured on the test machine,
// 16 connections commit about 4,000 one-row transactions a second, and
// about 500 with a notify in each (docs/performance.md). Without it,
// relays find new records at their next poll (outbox.WithInterval).
func WithNotify(on bool) Option { return option(func(s *Store) { s.noNotify = !on }) }
