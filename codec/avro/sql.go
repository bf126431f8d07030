package avro

import (
	"context"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"regexp"
)

// DefaultTable is the table NewSQLStore uses unless told otherwise.
const DefaultTable = "acemq_avro_schemas"

var tableName = regexp.MustCompile(`^[a-z_][a-z0-9_]{0,62}$`)

// SQLStore is a Store in a PostgreSQL table of its own:
//
//	CREATE TABLE IF NOT EXISTS acemq_avro_schemas (
//		id          BIGINT PRIMARY KEY CHECK (id BETWEEN 1 AND 4294967295),
//		fingerprint CHAR(64) NOT NULL UNIQUE,  -- hex SHA-256 of the exact schema bytes
//		schema      TEXT NOT NULL,
//		created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
//	)
//
// It works through any database/sql driver for PostgreSQL (pgx's stdlib,
// lib/pq); the program chooses and imports one. Registration is one
// INSERT … ON CONFLICT DO NOTHING, retried when two registrations of
// different schemas race for the same new id, so processes sharing the
// table agree on every id.
type SQLStore struct {
	db                  *sql.DB
	table               string
	insert, lookup, get string
	put                 string
}

// NewSQLStore returns a store on db in table (DefaultTable when ""), a
// lower-case SQL identifier. It does not touch the database: call Migrate
// once (it is idempotent) or create the table yourself.
func NewSQLStore(db *sql.DB, table string) (*SQLStore, error) {
	if db == nil {
		return nil, errors.New("avro: NewSQLStore needs a *sql.DB")
	}
	if table == "" {
		table = DefaultTable
	}
	if !tableName.MatchString(table) {
		return nil, fmt.Errorf("avro: the table name %q is not a lower-case SQL identifier", table)
	}
	return &SQLStore{
		db:    db,
		table: table,
		insert: `INSERT INTO ` + table + ` (id, fingerprint, schema)
			SELECT COALESCE(MAX(id), 0) + 1, $1, $2 FROM ` + table + `
			ON CONFLICT DO NOTHING RETURNING id`,
		lookup: `SELECT id FROM ` + table + ` WHERE fingerprint = $1`,
		get:    `SELECT schema FROM ` + table + ` WHERE id = $1`,
		put:    `INSERT INTO ` + table + ` (id, fingerprint, schema) VALUES ($1, $2, $3) ON CONFLICT DO NOTHING`,
	}, nil
}

// Table is the store's table name.
func (s *SQLStore) Table() string { return s.table }

// Migrate creates the table if it does not exist.
func (s *SQLStore) Migrate(ctx context.Context) error {
	_, err := s.db.ExecContext(ctx, `CREATE TABLE IF NOT EXISTS `+s.table+` (
		id          BIGINT PRIMARY KEY CHECK (id BETWEEN 1 AND 4294967295),
		fingerprint CHAR(64) NOT NULL UNIQUE,
		schema      TEXT NOT NULL,
		created_at  TIMESTAMPTZ NOT NULL DEFAULT now()
	)`)
	if err != nil {
		return fmt.Errorf("avro: creating the table %s: %w", s.table, err)
	}
	return nil
}

// registerTries bounds the retries of a registration that lost races for
// a new id.
const registerTries = 20

// Register implements Store.
func (s *SQLStore) Register(ctx context.Context, fp [32]byte, schema string) (uint32, error) {
	h := hex.EncodeToString(fp[:])
	for range registerTries {
		var id int64
		err := s.db.QueryRowContext(ctx, s.insert, h, schema).Scan(&id)
		if err == nil {
			return uint32(id), nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
		// Nothing inserted: the fingerprint is there already, or another
		// registration took the id.
		err = s.db.QueryRowContext(ctx, s.lookup, h).Scan(&id)
		if err == nil {
			return uint32(id), nil
		}
		if !errors.Is(err, sql.ErrNoRows) {
			return 0, err
		}
	}
	return 0, fmt.Errorf("avro: %d registrations in a row lost the race for a new id in %s", registerTries, s.table)
}

// Put implements Store.
func (s *SQLStore) Put(ctx context.Context, id uint32, fp [32]byte, schema string) error {
	if id == 0 {
		return errors.New("avro: schema id 0 is not a valid id")
	}
	h := hex.EncodeToString(fp[:])
	res, err := s.db.ExecContext(ctx, s.put, int64(id), h, schema)
	if err != nil {
		return err
	}
	if n, _ := res.RowsAffected(); n == 1 {
		return nil
	}
	var have int64
	err = s.db.QueryRowContext(ctx, s.lookup, h).Scan(&have)
	switch {
	case err == nil && have == int64(id):
		return nil
	case err == nil:
		return fmt.Errorf("the same schema is stored under id %d: %w", have, ErrConflict)
	case errors.Is(err, sql.ErrNoRows):
		return fmt.Errorf("id %d holds another schema: %w", id, ErrConflict)
	}
	return err
}

// Get implements Store.
func (s *SQLStore) Get(ctx context.Context, id uint32) (string, error) {
	var schema string
	err := s.db.QueryRowContext(ctx, s.get, int64(id)).Scan(&schema)
	if errors.Is(err, sql.ErrNoRows) {
		return "", fmt.Errorf("schema id %d: %w", id, ErrNotFound)
	}
	return schema, err
}
