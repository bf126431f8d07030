// Package pgnotify wakes an outbox relay with PostgreSQL's LISTEN/NOTIFY:
// sqlstore's outbox notifies its channel in the transaction that records a
// message, PostgreSQL delivers the notification when that transaction
// commits, and the relay publishes within milliseconds instead of at its
// next poll.
//
// It holds one connection of the pool for the LISTEN, reached through
// (*sql.Conn).Raw, so the *sql.DB must be opened with pgx's database/sql
// driver (github.com/jackc/pgx/v5/stdlib). It is a package of its own so
// that an application that does not use it does not link pgx.
package pgnotify

import (
	"context"
	"database/sql"
	"errors"
	"fmt"

	"github.com/acemq/acemq/outbox"
	"github.com/jackc/pgx/v5"
	"github.com/jackc/pgx/v5/stdlib"
)

// Notifier listens on one channel. It implements outbox.Notifier.
type Notifier struct {
	db      *sql.DB
	channel string
}

var _ outbox.Notifier = (*Notifier)(nil)

// New returns a notifier on channel (sqlstore.Store.NotifyChannel) through
// db, a pool opened with pgx's driver.
func New(db *sql.DB, channel string) *Notifier { return &Notifier{db: db, channel: channel} }

// Listen implements outbox.Notifier: it takes a connection from the pool
// for as long as it listens and gives it back closed (a connection that
// was listening is not reused).
func (n *Notifier) Listen(ctx context.Context, wake func()) error {
	if n.db == nil {
		return errors.New("pgnotify: New was given a nil *sql.DB")
	}
	conn, err := n.db.Conn(ctx)
	if err != nil {
		return fmt.Errorf("pgnotify: taking a connection to listen on: %w", err)
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		sc, ok := dc.(*stdlib.Conn)
		if !ok {
			return fmt.Errorf("pgnotify: the *sql.DB's driver connection is a %T; open it with pgx's driver (github.com/jackc/pgx/v5/stdlib)", dc)
		}
		pc := sc.Conn()
		// Raw gives the connection back to the pool afterwards: mark it
		// bad by closing it, whatever happens, so no LISTEN outlives us.
		defer pc.Close(context.Background())
		if _, err := pc.Exec(ctx, "LISTEN "+pgx.Identifier{n.channel}.Sanitize()); err != nil {
			return fmt.Errorf("pgnotify: LISTEN %s: %w", n.channel, err)
		}
		wake() // anything recorded before the LISTEN took effect
		for {
			if _, err := pc.WaitForNotification(ctx); err != nil {
				if ctx.Err() != nil {
					return ctx.Err()
				}
				return fmt.Errorf("pgnotify: waiting for a notification on %s: %w", n.channel, err)
			}
			wake()
		}
	})
}
