package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
	"strings"
)

// Store is the SQL home of the inbox, the outbox and the saga log, on the
// application's *sql.DB. It creates nothing by itself: CreateTables makes
// the tables (or run the statements DDL returns through your own
// migrations).
type Store struct {
	db       *sql.DB
	d        Dialect
	inbox    string
	outbox   string
	saga     string
	channel  string
	noNotify bool
}

// The default table names.
const (
	DefaultInboxTable  = "acemq_inbox"
	DefaultOutboxTable = "acemq_outbox"
	DefaultSagaTable   = "acemq_saga"
)

var tableName = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

// New returns the store of db in dialect d. Table names (see the With…
// options) must be plain identifiers, optionally schema-qualified
// (schema.table): they are written into the statements as they are.
func New(db *sql.DB, d Dialect, opts ...Option) (*Store, error) {
	s := &Store{db: db, d: d, inbox: DefaultInboxTable, outbox: DefaultOutboxTable, saga: DefaultSagaTable}
	for _, o := range opts {
		o.apply(s)
	}
	if db == nil {
		return nil, errors.New("sqlstore: New was given a nil *sql.DB")
	}
	if d.name == "" {
		return nil, errors.New("sqlstore: New needs a dialect: sqlstore.Postgres or sqlstore.MySQL")
	}
	for _, t := range []string{s.inbox, s.outbox, s.saga} {
		if !tableName.MatchString(t) {
			return nil, fmt.Errorf("sqlstore: the table name %q is not a plain identifier (letters, digits, _; optionally schema.table)", t)
		}
	}
	if s.channel == "" {
		s.channel = strings.ReplaceAll(s.outbox, ".", "_")
	}
	if !tableName.MatchString(s.channel) || strings.Contains(s.channel, ".") {
		return nil, fmt.Errorf("sqlstore: the notification channel %q is not a plain identifier", s.channel)
	}
	return s, nil
}

// DB is the store's database.
func (s *Store) DB() *sql.DB { return s.db }

// Dialect is the store's dialect.
func (s *Store) Dialect() Dialect { return s.d }

// NotifyChannel is the PostgreSQL channel a recording notifies (the
// outbox table's name by default; see WithNotifyChannel): give it to
// pgnotify.New.
func (s *Store) NotifyChannel() string { return s.channel }

// DDL returns the statements that create the three tables and their
// indexes, each idempotent (IF NOT EXISTS), for migrations of your own.
func (s *Store) DDL() []string {
	var out []string
	out = append(out, s.d.createTable(s.inbox, s.inboxDDL())...)
	out = append(out, s.d.createTable(s.outbox, s.outboxDDL())...)
	out = append(out, s.d.createTable(s.saga, s.sagaDDL())...)
	return out
}

// CreateTables runs DDL: the tables and indexes that are missing are
// created; existing ones are left as they are.
func (s *Store) CreateTables(ctx context.Context) error {
	for _, q := range s.DDL() {
		if _, err := s.db.ExecContext(ctx, q); err != nil {
			return fmt.Errorf("sqlstore: creating tables: %w\nthe statement was:\n%s", err, q)
		}
	}
	return nil
}

// DropTables drops the three tables, with everything in them. It is for
// tests and teardown; nothing calls it for you.
func (s *Store) DropTables(ctx context.Context) error {
	var errs []error
	for _, t := range []string{s.inbox, s.outbox, s.saga} {
		if _, err := s.db.ExecContext(ctx, "DROP TABLE IF EXISTS "+t); err != nil {
			errs = append(errs, fmt.Errorf("sqlstore: dropping %s: %w", t, err))
		}
	}
	return errors.Join(errs...)
}

func (s *Store) inboxDDL() tableDDL {
	return tableDDL{columns: []string{
		"consumer VARCHAR(191) NOT NULL",
		"message_key VARCHAR(191) NOT NULL",
		"token VARCHAR(64)",
		"lease_until BIGINT NOT NULL",
		"confirmed_at BIGINT",
		"PRIMARY KEY (consumer, message_key)",
	}, indexes: []index{{suffix: "confirmed", cols: "confirmed_at"}}}
}

func (s *Store) outboxDDL() tableDDL {
	t := tableDDL{columns: []string{
		"seq " + s.d.serial(),
		"message_id VARCHAR(255) NOT NULL",
		"exchange VARCHAR(255) NOT NULL",
		"routing_key VARCHAR(255) NOT NULL",
		"content_type VARCHAR(255) NOT NULL",
		"headers " + s.d.text() + " NOT NULL",
		"body " + s.d.blob() + " NOT NULL",
		"mandatory BOOLEAN NOT NULL",
		"transient BOOLEAN NOT NULL",
		"recorded_at BIGINT NOT NULL",
		"attempts INTEGER NOT NULL DEFAULT 0",
		"next_attempt_at BIGINT NOT NULL",
		"last_error " + s.d.text(),
		"retired_at BIGINT",
	}, indexes: []index{{suffix: "dest", cols: "exchange, routing_key, seq"}}}
	if s.d.dollar {
		t.indexes = append(t.indexes, index{suffix: "pending", cols: "seq", where: "retired_at IS NULL"})
	} else {
		t.indexes = append(t.indexes, index{suffix: "pending", cols: "retired_at, seq"})
	}
	return t
}

func (s *Store) sagaDDL() tableDDL {
	return tableDDL{columns: []string{
		"saga VARCHAR(191) NOT NULL",
		"id VARCHAR(191) NOT NULL",
		"state VARCHAR(32) NOT NULL",
		"step INTEGER NOT NULL",
		"data " + s.d.blob() + " NOT NULL",
		"error " + s.d.text(),
		"failures " + s.d.text(),
		"owner VARCHAR(64)",
		"lease_until BIGINT NOT NULL",
		"created_at BIGINT NOT NULL",
		"updated_at BIGINT NOT NULL",
		"PRIMARY KEY (saga, id)",
	}, indexes: []index{{suffix: "state", cols: "saga, state"}}}
}

// in returns "?, ?, …" for n values.
func in(n int) string { return strings.TrimSuffix(strings.Repeat("?, ", n), ", ") }
