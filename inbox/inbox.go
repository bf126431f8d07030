package inbox

import (
	"context"
	"crypto/sha256"
	"database/sql"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/tuning"
	"github.com/google/uuid"
)

// Inbox is the idempotent-consumer state of one consumer: its name scopes
// the keys in the store, so consumers doing different work on the same
// messages keep separate records.
type Inbox struct {
	store Store
	name  string
	cfg   config
	err   error

	mu        sync.Mutex
	lastPrune time.Time
	pruning   bool
}

// New returns the inbox of the consumer called name in store. Mistakes in
// the arguments are reported by every wrapped handler as a fatal reject and
// by Err.
func New(store Store, name string, opts ...Option) *Inbox {
	in := &Inbox{store: store, name: name, cfg: config{
		lease: DefaultLease, pruneEvery: DefaultPruneEvery, delay: tuning.InProgressDelay,
		key: func(e acemq.Envelope) string { return e.ID() },
	}, lastPrune: time.Now()}
	if r, ok := store.(interface{ DefaultRetention() time.Duration }); ok {
		in.cfg.retention = r.DefaultRetention()
	} else {
		in.cfg.retention = DefaultRetention
	}
	for _, o := range opts {
		o.apply(&in.cfg)
	}
	switch {
	case store == nil:
		in.err = errors.New("inbox: New was given a nil store")
	case name == "":
		in.err = errors.New("inbox: New needs the consumer's name, which scopes its keys")
	case len(name) > 191:
		in.err = fmt.Errorf("inbox: the consumer name is %d bytes; at most 191 fit the SQL stores' key", len(name))
	case in.cfg.lease <= 0:
		in.err = fmt.Errorf("inbox: WithLease(%v): a lease must be positive", in.cfg.lease)
	case in.cfg.retention <= 0:
		in.err = fmt.Errorf("inbox: WithRetention(%v): the retention must be positive", in.cfg.retention)
	case in.cfg.pruneEvery < 0:
		in.err = fmt.Errorf("inbox: WithPruneEvery(%v): use 0 to turn pruning off", in.cfg.pruneEvery)
	case in.cfg.key == nil:
		in.err = errors.New("inbox: WithKey was given a nil function")
	}
	return in
}

// Err reports a mistake in New's arguments.
func (in *Inbox) Err() error { return in.err }

// Name is the consumer's name.
func (in *Inbox) Name() string { return in.name }

// Prune deletes expired claims and confirmations older than the retention
// now, and reports how many rows went. The inbox does it by itself every
// WithPruneEvery.
func (in *Inbox) Prune(ctx context.Context) (int, error) {
	if in.err != nil {
		return 0, in.err
	}
	now := time.Now()
	n, err := in.store.Prune(ctx, now, now.Add(-in.cfg.retention))
	if err != nil {
		return n, fmt.Errorf("inbox %q: pruning: %w", in.name, err)
	}
	return n, nil
}

func (in *Inbox) maybePrune() {
	if in.cfg.pruneEvery == 0 {
		return
	}
	in.mu.Lock()
	if in.pruning || time.Since(in.lastPrune) < in.cfg.pruneEvery {
		in.mu.Unlock()
		return
	}
	in.pruning = true
	in.mu.Unlock()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	_, err := in.Prune(ctx)
	cancel()
	in.mu.Lock()
	in.pruning, in.lastPrune = false, time.Now()
	in.mu.Unlock()
	in.report(err)
}

func (in *Inbox) report(err error) {
	if err != nil && in.cfg.onError != nil {
		in.cfg.onError(err)
	}
}

// claim claims m's key. done is non-nil when the handler must not run:
// the Ack to return.
func (in *Inbox) claim(ctx context.Context, env acemq.Envelope) (key, token string, done *acemq.Ack) {
	if in.err != nil {
		a := acemq.Reject(acemq.Fatal(in.err))
		return "", "", &a
	}
	in.maybePrune()
	key = storedKey(in.cfg.key(env))
	if key == "" {
		return "", "", nil
	}
	token = uuid.NewString()
	st, err := in.store.Claim(ctx, in.name, key, token, time.Now(), in.cfg.lease)
	var a acemq.Ack
	switch {
	case err != nil:
		a = acemq.Retry(fmt.Errorf("inbox %q: claiming key %q: %w", in.name, key, err))
	case st == Done:
		a = acemq.Duplicate()
	case st == Held:
		a = acemq.InProgress(in.cfg.delay)
	default:
		return key, token, nil
	}
	return key, token, &a
}

// MaxKeyBytes is the longest key stored as it is; a longer one is stored
// as "sha256:" and its SHA-256 in hex (the SQL stores' key column holds 191
// characters).
const MaxKeyBytes = 191

func storedKey(k string) string {
	if len(k) <= MaxKeyBytes {
		return k
	}
	sum := sha256.Sum256([]byte(k))
	return "sha256:" + hex.EncodeToString(sum[:])
}

// release gives up a claim, with a context of its own: the handler's may
// be cancelled by now.
func (in *Inbox) release(key, token string) {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := in.store.Release(ctx, in.name, key, token); err != nil {
		in.report(fmt.Errorf("inbox %q: releasing key %q (its lease will end it): %w", in.name, key, err))
	}
}

// succeeded reports whether a handler's Ack means its work is done.
func succeeded(a acemq.Ack) bool { return a.Decision() == acemq.DecisionAccept && !a.IsDuplicate() }

// Wrap returns a handler that runs h at most once per key while the key's
// confirmation is kept: a message whose key is confirmed is acknowledged
// as a duplicate (acemq.Duplicate) without running h; one whose key
// another worker holds is put back (acemq.InProgress, no attempt spent).
// When h accepts, the key is confirmed; when h asks for anything else, or
// panics, the claim is released so that a retry runs h again.
//
// h's own effects are not in the store's transaction: a crash after h's
// work and before the confirmation runs h again once the lease ends. Use
// WrapTx to make h's database writes and the confirmation one commit.
func Wrap[T any](in *Inbox, h acemq.Handler[T]) acemq.Handler[T] {
	return func(ctx context.Context, m acemq.Message[T]) (ack acemq.Ack) {
		key, token, done := in.claim(ctx, m.Envelope)
		if done != nil {
			return *done
		}
		if key == "" {
			return h(ctx, m)
		}
		ok := false
		defer func() {
			if !ok {
				in.release(key, token)
			}
		}()
		ack = h(ctx, m)
		if !succeeded(ack) {
			return ack
		}
		ok = true
		cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
		defer cancel()
		if err := in.store.Confirm(cctx, in.name, key, token, time.Now()); err != nil {
			in.report(fmt.Errorf("inbox %q: confirming key %q after its work was done: %w", in.name, key, err))
		}
		return ack
	}
}

// TxHandler is a handler given the transaction in which its key's
// confirmation commits: write the message's effects through tx and they
// commit together, or not at all. Do not commit or roll back tx.
type TxHandler[T any] func(ctx context.Context, tx *sql.Tx, m acemq.Message[T]) acemq.Ack

// WrapTx is Wrap for a database store: h runs in a transaction of the
// store's database, and when h accepts, the confirmation is written in
// that transaction and it commits — h's writes and the confirmation are
// one commit, so a crash anywhere leaves both or neither, and a
// redelivery after the commit is acknowledged as a duplicate without
// running h. When h asks for anything else, or panics, the transaction is
// rolled back and the claim released. It fails when the inbox's store is
// not a TxStore (the memory store is not).
func WrapTx[T any](in *Inbox, h TxHandler[T]) (acemq.Handler[T], error) {
	if in.err != nil {
		return nil, in.err
	}
	ts, ok := in.store.(TxStore)
	if !ok {
		return nil, fmt.Errorf("inbox: WrapTx needs a database store (sqlstore); %T cannot share a transaction with the handler", in.store)
	}
	return func(ctx context.Context, m acemq.Message[T]) (ack acemq.Ack) {
		key, token, done := in.claim(ctx, m.Envelope)
		if done != nil {
			return *done
		}
		tx, err := ts.DB().BeginTx(ctx, nil)
		if err != nil {
			if key != "" {
				in.release(key, token)
			}
			return acemq.Retry(fmt.Errorf("inbox %q: beginning the handler's transaction: %w", in.name, err))
		}
		committed := false
		defer func() {
			if !committed {
				_ = tx.Rollback()
				if key != "" {
					in.release(key, token)
				}
			}
		}()
		ack = h(ctx, tx, m)
		if !succeeded(ack) {
			return ack
		}
		if key != "" {
			err := ts.ConfirmTx(ctx, tx, in.name, key, token, time.Now())
			if errors.Is(err, ErrClaimLost) {
				// Another worker took the key over: its run decides.
				return acemq.InProgress(in.cfg.delay)
			}
			if err != nil {
				return acemq.Retry(fmt.Errorf("inbox %q: confirming key %q: %w", in.name, key, err))
			}
		}
		if err := tx.Commit(); err != nil {
			// Whether it committed is unknown; the release in the defer
			// deletes only an unconfirmed claim, so a commit that did
			// happen keeps its confirmation and the retry is a duplicate.
			return acemq.Retry(fmt.Errorf("inbox %q: committing the handler's transaction: %w", in.name, err))
		}
		committed = true
		return ack
	}, nil
}
