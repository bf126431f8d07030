// Package sqltest opens the test databases (PostgreSQL through pgx's
// database/sql driver, MariaDB/MySQL through go-sql-driver) and gives each
// test a sqlstore.Store on tables of its own, dropped when the test ends.
package sqltest

import (
	"context"
	"database/sql"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/sqlstore"
	_ "github.com/go-sql-driver/mysql" // "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
)

// Open opens the database of dialect d (skipped without its DSN, failed in
// CI), closed when the test ends.
func Open(t testing.TB, d sqlstore.Dialect) *sql.DB {
	t.Helper()
	driver, dsn := "pgx", ""
	if d == sqlstore.MySQL {
		driver, dsn = "mysql", testenv.MySQLDSN(t)
	} else {
		dsn = testenv.PostgresDSN(t)
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		t.Fatalf("opening %s: %v", d, err)
	}
	t.Cleanup(func() { _ = db.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := db.PingContext(ctx); err != nil {
		t.Fatalf("%s does not answer: %v", d, err)
	}
	return db
}

// Store returns a store on db with uniquely named tables, created now and
// dropped when the test ends.
func Store(t testing.TB, db *sql.DB, d sqlstore.Dialect, opts ...sqlstore.Option) *sqlstore.Store {
	t.Helper()
	opts = append([]sqlstore.Option{
		sqlstore.WithInboxTable(testenv.Table("t_inbox")),
		sqlstore.WithOutboxTable(testenv.Table("t_outbox")),
		sqlstore.WithSagaTable(testenv.Table("t_saga")),
	}, opts...)
	s, err := sqlstore.New(db, d, opts...)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := s.CreateTables(ctx); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		if err := s.DropTables(ctx); err != nil {
			t.Errorf("dropping the test's tables: %v", err)
		}
	})
	return s
}

// Each runs f on PostgreSQL and on MySQL/MariaDB, as subtests.
func Each(t *testing.T, f func(t *testing.T, db *sql.DB, d sqlstore.Dialect)) {
	for _, d := range []sqlstore.Dialect{sqlstore.Postgres, sqlstore.MySQL} {
		t.Run(d.String(), func(t *testing.T) { f(t, Open(t, d), d) })
	}
}
