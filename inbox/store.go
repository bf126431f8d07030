package inbox

import (
	"context"
	"database/sql"
	"errors"
	"time"
)

// State is what a claim found.
type State int

// The states a claim can find.
const (
	// Claimed: the key was free (never seen, released, or its lease ran
	// out); the caller now holds it.
	Claimed State = iota + 1
	// Done: the key's work was confirmed; do not run it again.
	Done
	// Held: another worker holds a live claim on the key.
	Held
)

// String names the state.
func (s State) String() string {
	switch s {
	case Claimed:
		return "claimed"
	case Done:
		return "done"
	case Held:
		return "held"
	}
	return "State(?)"
}

// ErrClaimLost is returned by Confirm when the caller's claim is no longer
// its own: the lease ran out and another worker claimed the key, or the
// claim was pruned. Like the driver's sentinels it is a fragment, met
// wrapped in the words of the Inbox that asked the store.
var ErrClaimLost = errors.New("the claim was lost (its lease ran out and the key was claimed again, or it was pruned)")

// Store keeps claims and confirmations, per consumer name and key.
// Implementations: NewMemory here, and sqlstore.Store.Inbox for PostgreSQL
// and MySQL/MariaDB.
type Store interface {
	// Claim takes the key for token until now+lease, unless the key is
	// confirmed (Done) or held by a live claim (Held).
	Claim(ctx context.Context, consumer, key, token string, now time.Time, lease time.Duration) (State, error)
	// Confirm records the key's work as done, if token still holds the
	// claim (else ErrClaimLost).
	Confirm(ctx context.Context, consumer, key, token string, now time.Time) error
	// Release gives up token's claim so the key can be claimed again.
	Release(ctx context.Context, consumer, key, token string) error
	// Prune deletes the claims whose lease ended before now and the
	// confirmations made before confirmedBefore, and reports how many.
	Prune(ctx context.Context, now, confirmedBefore time.Time) (int, error)
}

// TxStore is a Store in a database: WrapTx runs the handler in a
// transaction of DB and commits the confirmation in it.
type TxStore interface {
	Store
	DB() *sql.DB
	// ConfirmTx is Confirm inside tx: it commits or rolls back with it.
	ConfirmTx(ctx context.Context, tx *sql.Tx, consumer, key, token string, now time.Time) error
}
