package sqlstore

import (
	"context"
	"database/sql"
	"fmt"
	"time"

	"github.com/acemq/acemq/outbox"
)

// Outbox is the store's outbox.Store and outbox.Inspector: records in the
// outbox table, times as epoch milliseconds. Relay locks its batch with
// SELECT … FOR UPDATE SKIP LOCKED in a READ COMMITTED transaction held
// while the batch is published, so relays on one table never hand out the
// same record twice at once; published records are deleted in that
// transaction.
type Outbox struct{ s *Store }

// Outbox returns the store's outbox.
func (s *Store) Outbox() *Outbox { return &Outbox{s} }

var (
	_ outbox.Store     = (*Outbox)(nil)
	_ outbox.Inspector = (*Outbox)(nil)
)

func (o *Outbox) q(s string) string { return o.s.d.bind(s) }

const recordCols = "seq, message_id, exchange, routing_key, content_type, headers, body, mandatory, transient, recorded_at, attempts, last_error, retired_at"

// Add implements outbox.Store: one INSERT per record through tx (the
// application's transaction), and on PostgreSQL a pg_notify on the
// store's channel, delivered when tx commits.
func (o *Outbox) Add(ctx context.Context, tx outbox.Execer, recs ...outbox.Record) error {
	if tx == nil {
		tx = o.s.db
	}
	ins := o.q("INSERT INTO " + o.s.outbox + " (message_id, exchange, routing_key, content_type, headers, body, mandatory, transient, recorded_at, attempts, next_attempt_at) VALUES (" + in(11) + ")")
	for _, r := range recs {
		h, err := outbox.MarshalHeaders(r.Headers)
		if err != nil {
			return err
		}
		body := r.Body
		if body == nil {
			body = []byte{}
		}
		ms := r.Recorded.UnixMilli()
		if _, err := tx.ExecContext(ctx, ins, r.MessageID, r.Exchange, r.RoutingKey, r.ContentType, string(h), body, r.Mandatory, r.Transient, ms, 0, ms); err != nil {
			return err
		}
	}
	if o.s.d.notify && !o.s.noNotify && len(recs) > 0 {
		if _, err := tx.ExecContext(ctx, "SELECT pg_notify($1, '')", o.s.channel); err != nil {
			return err
		}
	}
	return nil
}

type scanner interface{ Scan(...any) error }

func scanRecord(sc scanner) (outbox.Record, error) {
	var r outbox.Record
	var headers string
	var recorded int64
	var lastErr sql.NullString
	var retired sql.NullInt64
	if err := sc.Scan(&r.Seq, &r.MessageID, &r.Exchange, &r.RoutingKey, &r.ContentType, &headers, &r.Body, &r.Mandatory, &r.Transient, &recorded, &r.Attempts, &lastErr, &retired); err != nil {
		return r, err
	}
	r.Recorded = time.UnixMilli(recorded)
	r.LastError = lastErr.String
	if retired.Valid {
		r.Retired = time.UnixMilli(retired.Int64)
	}
	h, err := outbox.UnmarshalHeaders([]byte(headers))
	r.Headers = h
	return r, err
}

// Relay implements outbox.Store.
func (o *Outbox) Relay(ctx context.Context, now time.Time, limit int, f func([]outbox.Record) []outbox.Result) (int, error) {
	t := o.s.outbox
	tx, err := o.s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted})
	if err != nil {
		return 0, err
	}
	defer func() { _ = tx.Rollback() }()
	// On MySQL/MariaDB the scan is forced onto the primary key, so that a
	// relay locks clustered records only: locks taken on the secondary
	// indexes let two relays deadlock against each other's DELETE.
	from := t
	if !o.s.d.dollar {
		from = t + " FORCE INDEX (PRIMARY)"
	}
	rows, err := tx.QueryContext(ctx, o.q("SELECT "+recordCols+" FROM "+from+" WHERE retired_at IS NULL AND next_attempt_at <= ? ORDER BY seq LIMIT ? FOR UPDATE SKIP LOCKED"), now.UnixMilli(), limit)
	if err != nil {
		return 0, err
	}
	var recs []outbox.Record
	var unreadable []outbox.Record
	var unreadableErr []error
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil && r.Seq == 0 {
			rows.Close()
			return 0, err
		}
		if err != nil {
			unreadable, unreadableErr = append(unreadable, r), append(unreadableErr, err)
			continue
		}
		recs = append(recs, r)
	}
	if err := rows.Err(); err != nil {
		return 0, err
	}
	rows.Close()
	// A destination's records go out only in order: those of the batch
	// are cut at the first pending record of the destination the batch
	// does not hold (locked by another relay, or waiting out a backoff).
	type dest struct{ ex, rk string }
	byDest := map[dest][]int64{}
	for _, r := range recs {
		d := dest{r.Exchange, r.RoutingKey}
		byDest[d] = append(byDest[d], r.Seq)
	}
	cut := map[dest]int64{} // records of d from this seq on wait
	for d, seqs := range byDest {
		last := seqs[len(seqs)-1]
		pending, err := tx.QueryContext(ctx, o.q("SELECT seq FROM "+t+" WHERE exchange = ? AND routing_key = ? AND seq <= ? AND retired_at IS NULL ORDER BY seq LIMIT ?"), d.ex, d.rk, last, len(seqs)+1)
		if err != nil {
			return 0, err
		}
		i := 0
		for pending.Next() {
			var seq int64
			if err := pending.Scan(&seq); err != nil {
				pending.Close()
				return 0, err
			}
			if i < len(seqs) && seq == seqs[i] {
				i++
				continue
			}
			break
		}
		if err := pending.Err(); err != nil {
			pending.Close()
			return 0, err
		}
		pending.Close()
		if i < len(seqs) {
			cut[d] = seqs[i]
		}
	}
	ready := recs[:0]
	for _, r := range recs {
		if c, ok := cut[dest{r.Exchange, r.RoutingKey}]; !ok || r.Seq < c {
			ready = append(ready, r)
		}
	}
	var results []outbox.Result
	if len(ready) > 0 {
		results = f(ready)
	}
	var updates []update
	for i, r := range ready {
		if i >= len(results) {
			break
		}
		res := results[i]
		switch {
		case res.Published:
			updates = append(updates, update{seq: r.Seq, published: true})
		case res.Err != nil:
			updates = append(updates, update{seq: r.Seq, reason: res.Err.Error(), next: res.Next, retire: res.Retire})
		}
	}
	for i, r := range unreadable {
		updates = append(updates, update{seq: r.Seq, reason: "the stored record cannot be read: " + unreadableErr[i].Error(), next: now, retire: true})
	}
	err = o.apply(ctx, tx, updates, now)
	if err == nil {
		err = tx.Commit()
	}
	// The batch went out; its results must be kept, or it goes out again.
	// A deadlock or a lost connection rolled them back: write them again
	// in a transaction of their own (deleting a published record and
	// counting a failure are safe to repeat on the same rows).
	for try := 0; err != nil && try < 3 && ctx.Err() == nil && len(updates) > 0; try++ {
		_ = tx.Rollback()
		if tx, err = o.s.db.BeginTx(ctx, &sql.TxOptions{Isolation: sql.LevelReadCommitted}); err != nil {
			continue
		}
		if err = o.apply(ctx, tx, updates, now); err == nil {
			err = tx.Commit()
		}
	}
	if err != nil {
		return 0, fmt.Errorf("recording what became of a batch that was relayed (it will be relayed again): %w", err)
	}
	return len(ready) + len(unreadable), nil
}

// update is what to write about one record of a batch.
type update struct {
	seq       int64
	published bool
	reason    string
	next      time.Time
	retire    bool
}

// apply writes a batch's results in tx: the published records deleted,
// the failed ones counted.
func (o *Outbox) apply(ctx context.Context, tx *sql.Tx, updates []update, now time.Time) error {
	var published []any
	for _, u := range updates {
		if u.published {
			published = append(published, u.seq)
			continue
		}
		if err := o.fail(ctx, tx, u.seq, u.reason, u.next, u.retire, now); err != nil {
			return err
		}
	}
	for len(published) > 0 {
		n := min(len(published), 500)
		if _, err := tx.ExecContext(ctx, o.q("DELETE FROM "+o.s.outbox+" WHERE seq IN ("+in(n)+")"), published[:n]...); err != nil {
			return err
		}
		published = published[n:]
	}
	return nil
}

func (o *Outbox) fail(ctx context.Context, tx *sql.Tx, seq int64, reason string, next time.Time, retire bool, now time.Time) error {
	var retired any
	if retire {
		retired = now.UnixMilli()
	}
	_, err := tx.ExecContext(ctx, o.q("UPDATE "+o.s.outbox+" SET attempts = attempts + 1, last_error = ?, next_attempt_at = ?, retired_at = ? WHERE seq = ?"),
		reason, next.UnixMilli(), retired, seq)
	return err
}

// Status implements outbox.Inspector.
func (o *Outbox) Status(ctx context.Context) ([]outbox.DestinationStatus, error) {
	rows, err := o.s.db.QueryContext(ctx, "SELECT exchange, routing_key, "+
		"SUM(CASE WHEN retired_at IS NULL THEN 1 ELSE 0 END), SUM(CASE WHEN retired_at IS NULL THEN 0 ELSE 1 END), "+
		"MIN(CASE WHEN retired_at IS NULL THEN recorded_at END) FROM "+o.s.outbox+" GROUP BY exchange, routing_key ORDER BY exchange, routing_key")
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []outbox.DestinationStatus
	for rows.Next() {
		var s outbox.DestinationStatus
		var oldest sql.NullInt64
		if err := rows.Scan(&s.Exchange, &s.RoutingKey, &s.Pending, &s.Retired, &oldest); err != nil {
			return nil, err
		}
		if oldest.Valid {
			s.OldestPending = time.UnixMilli(oldest.Int64)
		}
		out = append(out, s)
	}
	return out, rows.Err()
}

// Retired implements outbox.Inspector.
func (o *Outbox) Retired(ctx context.Context, limit int) ([]outbox.Record, error) {
	if limit <= 0 {
		limit = 1 << 30
	}
	rows, err := o.s.db.QueryContext(ctx, o.q("SELECT "+recordCols+" FROM "+o.s.outbox+" WHERE retired_at IS NOT NULL ORDER BY seq LIMIT ?"), limit)
	if err != nil {
		return nil, err
	}
	defer rows.Close()
	var out []outbox.Record
	for rows.Next() {
		r, err := scanRecord(rows)
		if err != nil && r.Seq == 0 {
			return nil, err
		}
		out = append(out, r)
	}
	return out, rows.Err()
}

// Revive implements outbox.Inspector.
func (o *Outbox) Revive(ctx context.Context, seqs ...int64) (int, error) {
	q := "UPDATE " + o.s.outbox + " SET retired_at = NULL, attempts = 0, next_attempt_at = ? WHERE retired_at IS NOT NULL"
	args := []any{time.Now().UnixMilli()}
	if len(seqs) > 0 {
		q += " AND seq IN (" + in(len(seqs)) + ")"
		for _, s := range seqs {
			args = append(args, s)
		}
	}
	res, err := o.s.db.ExecContext(ctx, o.q(q), args...)
	if err != nil {
		return 0, fmt.Errorf("sqlstore: reviving retired records: %w", err)
	}
	n, err := res.RowsAffected()
	if err == nil && n > 0 && o.s.d.notify {
		_, _ = o.s.db.ExecContext(ctx, "SELECT pg_notify($1, '')", o.s.channel)
	}
	return int(n), err
}
