package sqlstore

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq/inbox"
)

// Inbox is the store's inbox.TxStore: claims and confirmations in the
// inbox table, times as epoch milliseconds of the workers' clocks.
type Inbox struct{ s *Store }

// Inbox returns the store's inbox.
func (s *Store) Inbox() *Inbox { return &Inbox{s} }

var _ inbox.TxStore = (*Inbox)(nil)

// DB implements inbox.TxStore.
func (i *Inbox) DB() *sql.DB { return i.s.db }

// DefaultRetention is inbox.DefaultRetention (7 days).
func (i *Inbox) DefaultRetention() time.Duration { return inbox.DefaultRetention }

func (i *Inbox) q(s string) string { return i.s.d.bind(s) }

// Claim implements inbox.Store: an insert of a new claim, else a takeover
// of an expired one, else a look at who has it.
func (i *Inbox) Claim(ctx context.Context, consumer, key, token string, now time.Time, lease time.Duration) (inbox.State, error) {
	t := i.s.inbox
	until := now.Add(lease).UnixMilli()
	for range 3 {
		res, err := i.s.db.ExecContext(ctx, i.q(i.s.d.insertOrNothing(t, "consumer, message_key, token, lease_until", "?, ?, ?, ?", "consumer")),
			consumer, key, token, until)
		if err != nil {
			return 0, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return 0, err
		} else if n == 1 {
			return inbox.Claimed, nil
		}
		res, err = i.s.db.ExecContext(ctx, i.q("UPDATE "+t+" SET token = ?, lease_until = ? WHERE consumer = ? AND message_key = ? AND confirmed_at IS NULL AND lease_until <= ?"),
			token, until, consumer, key, now.UnixMilli())
		if err != nil {
			return 0, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return 0, err
		} else if n == 1 {
			return inbox.Claimed, nil
		}
		var confirmed sql.NullInt64
		err = i.s.db.QueryRowContext(ctx, i.q("SELECT confirmed_at FROM "+t+" WHERE consumer = ? AND message_key = ?"), consumer, key).Scan(&confirmed)
		switch {
		case errors.Is(err, sql.ErrNoRows):
			continue // released or pruned meanwhile: claim again
		case err != nil:
			return 0, err
		case confirmed.Valid:
			return inbox.Done, nil
		default:
			return inbox.Held, nil
		}
	}
	return inbox.Held, nil
}

func (i *Inbox) confirm(ctx context.Context, ex interface {
	ExecContext(context.Context, string, ...any) (sql.Result, error)
}, consumer, key, token string, now time.Time) error {
	res, err := ex.ExecContext(ctx, i.q("UPDATE "+i.s.inbox+" SET confirmed_at = ?, token = NULL WHERE consumer = ? AND message_key = ? AND token = ? AND confirmed_at IS NULL"),
		now.UnixMilli(), consumer, key, token)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		return inbox.ErrClaimLost
	}
	return nil
}

// Confirm implements inbox.Store.
func (i *Inbox) Confirm(ctx context.Context, consumer, key, token string, now time.Time) error {
	return i.confirm(ctx, i.s.db, consumer, key, token, now)
}

// ConfirmTx implements inbox.TxStore.
func (i *Inbox) ConfirmTx(ctx context.Context, tx *sql.Tx, consumer, key, token string, now time.Time) error {
	return i.confirm(ctx, tx, consumer, key, token, now)
}

// Release implements inbox.Store.
func (i *Inbox) Release(ctx context.Context, consumer, key, token string) error {
	_, err := i.s.db.ExecContext(ctx, i.q("DELETE FROM "+i.s.inbox+" WHERE consumer = ? AND message_key = ? AND token = ? AND confirmed_at IS NULL"), consumer, key, token)
	return err
}

// Prune implements inbox.Store.
func (i *Inbox) Prune(ctx context.Context, now, confirmedBefore time.Time) (int, error) {
	res, err := i.s.db.ExecContext(ctx, i.q("DELETE FROM "+i.s.inbox+" WHERE (confirmed_at IS NULL AND lease_until <= ?) OR confirmed_at < ?"),
		now.UnixMilli(), confirmedBefore.UnixMilli())
	if err != nil {
		return 0, fmt.Errorf("sqlstore: pruning %s: %w", i.s.inbox, err)
	}
	n, err := res.RowsAffected()
	return int(n), err
}
