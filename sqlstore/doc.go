// Package sqlstore keeps the inbox, the outbox and the saga log in a SQL
// database through database/sql, on the application's own *sql.DB: the
// outbox records through the application's *sql.Tx, and the inbox hands
// the handler a *sql.Tx of the same database.
//
// One store speaks a dialect: Postgres (PostgreSQL 10 or later) or MySQL
// (MySQL 8.0.1 or later, MariaDB 10.6 or later). It needs no driver of its
// own: open the *sql.DB with the driver you use. This module's tests use
// pgx's database/sql driver for PostgreSQL (github.com/jackc/pgx/v5/stdlib:
// maintained, the common choice, and the one that gives package
// outbox/pgnotify its LISTEN connection) and go-sql-driver/mysql.
//
// Nothing is created silently: CreateTables creates the three tables and
// their indexes (idempotent, IF NOT EXISTS), or take DDL's statements into
// your migrations. The table names are options (WithInboxTable,
// WithOutboxTable, WithSagaTable). Times are stored as epoch milliseconds
// of the writing process's clock, in BIGINT columns, the same on every
// database.
//
//	store, err := sqlstore.New(db, sqlstore.Postgres)
//	err = store.CreateTables(ctx)
//	in := inbox.New(store.Inbox(), "billing")
//	pub := outbox.NewPublisher[Order](store.Outbox(), "orders")
//	s := saga.New("trip", store.SagaLog(), steps)
//
// docs/inbox.md, docs/outbox.md and docs/sagas.md in the repository show
// the tables and what each statement costs.
package sqlstore
