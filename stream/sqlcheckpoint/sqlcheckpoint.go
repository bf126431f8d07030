// Package sqlcheckpoint keeps stream readers' checkpoints
// (stream.Checkpoints) in a PostgreSQL table, through database/sql: one
// row per reader name with the last offset it settled.
//
//	db, _ := sql.Open("pgx", dsn) // any PostgreSQL driver for database/sql
//	store := sqlcheckpoint.New(db)
//	if err := store.Migrate(ctx); err != nil { … }
//	r, err := stream.Read(ctx, conn, "orders.events", handle,
//		stream.WithCheckpoints(store, "billing@orders.events"))
//
// The package brings no database driver of its own: the application opens
// the *sql.DB with the driver it already uses. The table is small and its
// own (acemq_stream_checkpoints unless WithTable says otherwise); Migrate
// creates it if it is missing. A save is one upsert; a reader saves every
// stream.WithCheckpointEvery messages, so the cost is one write per that
// many messages. The SQL is PostgreSQL's (ON CONFLICT, $n placeholders).
package sqlcheckpoint

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"regexp"
)

// DefaultTable is the table's name unless WithTable says otherwise.
const DefaultTable = "acemq_stream_checkpoints"

// Store is a stream.Checkpoints in a PostgreSQL table. It is safe for
// concurrent use.
type Store struct {
	db    *sql.DB
	table string
	err   error
}

// An Option configures New.
type Option interface{ apply(*Store) }

type option func(*Store)

func (f option) apply(s *Store) { f(s) }

var identifier = regexp.MustCompile(`^[A-Za-z_][A-Za-z0-9_]{0,62}(\.[A-Za-z_][A-Za-z0-9_]{0,62})?$`)

// WithTable names the table (optionally schema.table; letters, digits and
// underscores).
func WithTable(name string) Option {
	return option(func(s *Store) {
		if !identifier.MatchString(name) {
			s.err = fmt.Errorf("sqlcheckpoint: WithTable(%q): a table name is letters, digits and underscores, optionally schema.table", name)
			return
		}
		s.table = name
	})
}

// New returns a store on db.
func New(db *sql.DB, opts ...Option) *Store {
	s := &Store{db: db, table: DefaultTable}
	if db == nil {
		s.err = errors.New("sqlcheckpoint: New needs a *sql.DB")
	}
	for _, o := range opts {
		o.apply(s)
	}
	return s
}

// Migrate creates the table if it does not exist.
func (s *Store) Migrate(ctx context.Context) error {
	if s.err != nil {
		return s.err
	}
	_, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+s.table+` (
	reader TEXT PRIMARY KEY,
	position BIGINT NOT NULL,
	updated_at TIMESTAMPTZ NOT NULL DEFAULT now()
)`)
	if err != nil {
		return fmt.Errorf("sqlcheckpoint: creating the table %s: %w", s.table, err)
	}
	return nil
}

// Load returns the last offset saved for the reader name.
func (s *Store) Load(ctx context.Context, name string) (int64, bool, error) {
	if s.err != nil {
		return 0, false, s.err
	}
	var off int64
	err := s.db.QueryRowContext(ctx, `SELECT position FROM `+s.table+` WHERE reader = $1`, name).Scan(&off)
	switch {
	case errors.Is(err, sql.ErrNoRows):
		return 0, false, nil
	case err != nil:
		return 0, false, fmt.Errorf("sqlcheckpoint: loading the checkpoint of %q from %s (run Migrate first?): %w", name, s.table, err)
	}
	return off, true, nil
}

// Save records offset for the reader name.
func (s *Store) Save(ctx context.Context, name string, offset int64) error {
	if s.err != nil {
		return s.err
	}
	_, err := s.db.ExecContext(ctx, `INSERT INTO `+s.table+` (reader, position, updated_at) VALUES ($1, $2, now())
ON CONFLICT (reader) DO UPDATE SET position = EXCLUDED.position, updated_at = now()`, name, offset)
	if err != nil {
		return fmt.Errorf("sqlcheckpoint: saving the checkpoint of %q in %s: %w", name, s.table, err)
	}
	return nil
}
