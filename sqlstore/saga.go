package sqlstore

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"time"

	"github.com/acemq/acemq/saga"
)

// SagaLog is the store's saga.Log: one row per saga instance in the saga
// table, times as epoch milliseconds.
type SagaLog struct{ s *Store }

// SagaLog returns the store's saga log.
func (s *Store) SagaLog() *SagaLog { return &SagaLog{s} }

var _ saga.Log = (*SagaLog)(nil)

func (l *SagaLog) q(s string) string { return l.s.d.bind(s) }

const sagaCols = "saga, id, state, step, data, error, failures, owner, lease_until, created_at, updated_at"

func failures(r saga.Record) (string, error) {
	if len(r.Failures) == 0 {
		return "[]", nil
	}
	b, err := json.Marshal(r.Failures)
	return string(b), err
}

func nullable(s string) any {
	if s == "" {
		return nil
	}
	return s
}

// Create implements saga.Log.
func (l *SagaLog) Create(ctx context.Context, r saga.Record) error {
	f, err := failures(r)
	if err != nil {
		return err
	}
	data := r.Data
	if data == nil {
		data = []byte{}
	}
	res, err := l.s.db.ExecContext(ctx, l.q(l.s.d.insertOrNothing(l.s.saga, sagaCols, in(11), "saga")),
		r.Saga, r.ID, string(r.State), r.Step, data, nullable(r.Error), f, r.Owner, r.LeaseUntil.UnixMilli(), r.Created.UnixMilli(), r.Updated.UnixMilli())
	if err != nil {
		return err
	}
	if n, err := res.RowsAffected(); err != nil {
		return err
	} else if n != 1 {
		return saga.ErrExists
	}
	return nil
}

// Save implements saga.Log.
func (l *SagaLog) Save(ctx context.Context, r saga.Record) error {
	f, err := failures(r)
	if err != nil {
		return err
	}
	res, err := l.s.db.ExecContext(ctx, l.q("UPDATE "+l.s.saga+" SET state = ?, step = ?, data = ?, error = ?, failures = ?, lease_until = ?, updated_at = ? WHERE saga = ? AND id = ? AND owner = ?"),
		string(r.State), r.Step, r.Data, nullable(r.Error), f, r.LeaseUntil.UnixMilli(), r.Updated.UnixMilli(), r.Saga, r.ID, r.Owner)
	if err != nil {
		return err
	}
	n, err := res.RowsAffected()
	if err != nil {
		return err
	}
	if n != 1 {
		if _, err := l.Get(ctx, r.Saga, r.ID); errors.Is(err, saga.ErrNotFound) {
			return err
		}
		return saga.ErrNotOwner
	}
	return nil
}

// Claim implements saga.Log: candidates are read, then each is taken with
// an UPDATE that re-checks the lease, so two runners never both get one.
func (l *SagaLog) Claim(ctx context.Context, name, owner string, now time.Time, lease time.Duration, limit int) ([]saga.Record, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	rows, err := l.s.db.QueryContext(ctx, l.q("SELECT id FROM "+l.s.saga+" WHERE saga = ? AND state IN (?, ?) AND (lease_until <= ? OR owner = ?) ORDER BY created_at, id LIMIT ?"),
		name, string(saga.Running), string(saga.Compensating), now.UnixMilli(), owner, limit)
	if err != nil {
		return nil, err
	}
	var ids []string
	for rows.Next() {
		var id string
		if err := rows.Scan(&id); err != nil {
			rows.Close()
			return nil, err
		}
		ids = append(ids, id)
	}
	rows.Close()
	if err := rows.Err(); err != nil {
		return nil, err
	}
	var out []saga.Record
	for _, id := range ids {
		res, err := l.s.db.ExecContext(ctx, l.q("UPDATE "+l.s.saga+" SET owner = ?, lease_until = ? WHERE saga = ? AND id = ? AND state IN (?, ?) AND (lease_until <= ? OR owner = ?)"),
			owner, now.Add(lease).UnixMilli(), name, id, string(saga.Running), string(saga.Compensating), now.UnixMilli(), owner)
		if err != nil {
			return out, err
		}
		if n, err := res.RowsAffected(); err != nil {
			return out, err
		} else if n != 1 {
			continue // someone else took it
		}
		r, err := l.Get(ctx, name, id)
		if err != nil {
			return out, err
		}
		out = append(out, r)
	}
	return out, nil
}

func scanSaga(sc scanner) (saga.Record, error) {
	var r saga.Record
	var state string
	var errText, owner sql.NullString
	var f sql.NullString
	var lease, created, updated int64
	if err := sc.Scan(&r.Saga, &r.ID, &state, &r.Step, &r.Data, &errText, &f, &owner, &lease, &created, &updated); err != nil {
		return r, err
	}
	r.State, r.Error, r.Owner = saga.State(state), errText.String, owner.String
	r.LeaseUntil, r.Created, r.Updated = time.UnixMilli(lease), time.UnixMilli(created), time.UnixMilli(updated)
	if f.Valid && f.String != "" && f.String != "[]" {
		if err := json.Unmarshal([]byte(f.String), &r.Failures); err != nil {
			return r, err
		}
	}
	return r, nil
}

// Get implements saga.Log.
func (l *SagaLog) Get(ctx context.Context, name, id string) (saga.Record, error) {
	r, err := scanSaga(l.s.db.QueryRowContext(ctx, l.q("SELECT "+sagaCols+" FROM "+l.s.saga+" WHERE saga = ? AND id = ?"), name, id))
	if errors.Is(err, sql.ErrNoRows) {
		return r, saga.ErrNotFound
	}
	return r, err
}

// List implements saga.Log.
func (l *SagaLog) List(ctx context.Context, name string, state saga.State) ([]saga.Record, error) {
	rows, err := l.s.db.QueryContext(ctx, l.q("SELECT "+sagaCols+" FROM "+l.s.saga+" WHERE saga = ? AND state = ? ORDER BY created_at, id"), name, string(state))
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []saga.Record
	for rows.Next() {
		r, err := scanSaga(rows)
		if err != nil {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}
