package inbox_test

import (
	"context"
	"database/sql"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/inbox"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/sqltest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/sqlstore"
)

type job struct{ N int }

// rig consumes a queue with a wrapped handler and records settlements.
type rig struct {
	t   *testing.T
	c   *acemq.Conn
	q   string
	pub *acemq.Publisher[job]
	mu  sync.Mutex
	ss  []acemq.Settlement
}

func newRig(t *testing.T, url string) *rig {
	r := &rig{t: t}
	r.c = brokertest.Connect(t, url)
	r.q = brokertest.Queue(t, r.c, "inbox")
	r.c.OnSettle(func(s acemq.Settlement) { r.mu.Lock(); r.ss = append(r.ss, s); r.mu.Unlock() })
	r.pub = acemq.NewPublisher[job](r.c, "")
	return r
}

func (r *rig) consume(h acemq.Handler[job], opts ...acemq.ConsumeOption) {
	cons, err := acemq.Consume(r.t.Context(), r.c, r.q, h, opts...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { _ = cons.Close(context.Background()) })
}

func (r *rig) send(env acemq.Envelope, n int) {
	if _, err := r.pub.Send(r.t.Context(), r.q, job{n}, acemq.WithEnvelope(env)); err != nil {
		r.t.Fatal(err)
	}
}

func (r *rig) wait(n int) []acemq.Settlement {
	testenv.Eventually(r.t, fmt.Sprintf("%d settlements", n), func() bool {
		r.mu.Lock()
		defer r.mu.Unlock()
		return len(r.ss) >= n
	})
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]acemq.Settlement(nil), r.ss...)
}

// The same message delivered twice (a republish after a lost confirm, a
// redelivery after a lost ack) runs the handler once; the second is
// settled as a duplicate.
func TestWrapRunsOncePerKey(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newRig(t, url)
		in := inbox.New(inbox.NewMemory(), "billing")
		var runs atomic.Int32
		r.consume(inbox.Wrap(in, func(context.Context, acemq.Message[job]) acemq.Ack { runs.Add(1); return acemq.Accept() }))
		env := acemq.MustEnvelope(acemq.Fields{})
		r.send(env, 1)
		r.wait(1)
		r.send(env, 1)
		ss := r.wait(2)
		if runs.Load() != 1 {
			t.Fatalf("the handler ran %d times for one id", runs.Load())
		}
		if ss[0].Outcome != acemq.OutcomeAcked || ss[1].Outcome != acemq.OutcomeDuplicate {
			t.Errorf("outcomes %s, %s; want acked, duplicate", ss[0].Outcome, ss[1].Outcome)
		}
	})
}

// A failure releases the claim: the retry runs the handler again.
func TestWrapReleasesOnFailure(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newRig(t, url)
		store := inbox.NewMemory()
		in := inbox.New(store, "billing")
		var runs atomic.Int32
		r.consume(inbox.Wrap(in, func(context.Context, acemq.Message[job]) acemq.Ack {
			if runs.Add(1) == 1 {
				return acemq.Retry(errors.New("database busy"))
			}
			return acemq.Accept()
		}), acemq.WithRetry(retry.Fixed(3, time.Millisecond)))
		r.send(acemq.MustEnvelope(acemq.Fields{}), 1)
		ss := r.wait(2)
		// The retry's settlement may be recorded after the second
		// attempt's (it ends when the copy is confirmed).
		got := map[acemq.Outcome]int{ss[0].Outcome: 1}
		got[ss[1].Outcome]++
		if runs.Load() != 2 || got[acemq.OutcomeRetried] != 1 || got[acemq.OutcomeAcked] != 1 {
			t.Fatalf("runs %d, outcomes %v", runs.Load(), got)
		}
	})
}

// A key held by another worker is put back in progress, without running
// the handler or spending an attempt.
func TestWrapHeldKeyIsInProgress(t *testing.T) {
	store := inbox.NewMemory()
	env := acemq.MustEnvelope(acemq.Fields{})
	if st, _ := store.Claim(t.Context(), "billing", env.ID(), "elsewhere", time.Now(), time.Minute); st != inbox.Claimed {
		t.Fatal(st)
	}
	in := inbox.New(store, "billing", inbox.WithInProgressDelay(time.Second))
	h := inbox.Wrap(in, func(context.Context, acemq.Message[job]) acemq.Ack { t.Error("the handler ran"); return acemq.Accept() })
	ack := h(t.Context(), acemq.Message[job]{Envelope: env})
	if ack.Decision() != acemq.DecisionInProgress || ack.Delay() != time.Second {
		t.Fatalf("%v (delay %v), want in_progress after 1s", ack, ack.Delay())
	}
	// A panicking handler releases its claim before the panic goes on.
	in2 := inbox.New(inbox.NewMemory(), "x")
	other := acemq.MustEnvelope(acemq.Fields{})
	func() {
		defer func() { _ = recover() }()
		inbox.Wrap(in2, func(context.Context, acemq.Message[job]) acemq.Ack { panic("boom") })(t.Context(), acemq.Message[job]{Envelope: other})
	}()
	if ack := inbox.Wrap(in2, func(context.Context, acemq.Message[job]) acemq.Ack { return acemq.Accept() })(t.Context(), acemq.Message[job]{Envelope: other}); ack.Decision() != acemq.DecisionAccept || ack.IsDuplicate() {
		t.Errorf("after a panic the key is %v, want free", ack)
	}
}

func TestNewChecksItsArguments(t *testing.T) {
	for _, in := range []*inbox.Inbox{
		inbox.New(nil, "x"), inbox.New(inbox.NewMemory(), ""), inbox.New(inbox.NewMemory(), "x", inbox.WithLease(0)),
		inbox.New(inbox.NewMemory(), "x", inbox.WithKey(nil)), inbox.New(inbox.NewMemory(), "x", inbox.WithPruneEvery(-1)),
	} {
		if in.Err() == nil {
			t.Error("a mistake was accepted")
		}
	}
	if _, err := inbox.WrapTx(inbox.New(inbox.NewMemory(), "x"), func(context.Context, *sql.Tx, acemq.Message[job]) acemq.Ack { return acemq.Accept() }); err == nil {
		t.Error("WrapTx accepted the memory store")
	}
}

// Pruning runs by itself once its interval has passed.
func TestPruneOnSchedule(t *testing.T) {
	store := inbox.NewMemory()
	if st, _ := store.Claim(t.Context(), "c", "stale", "t", time.Now().Add(-time.Hour), time.Minute); st != inbox.Claimed {
		t.Fatal(st)
	}
	in := inbox.New(store, "c", inbox.WithPruneEvery(time.Nanosecond))
	time.Sleep(time.Millisecond)
	inbox.Wrap(in, func(context.Context, acemq.Message[job]) acemq.Ack { return acemq.Accept() })(t.Context(), acemq.Message[job]{Envelope: acemq.MustEnvelope(acemq.Fields{})})
	if store.Len() != 1 {
		t.Fatalf("%d entries after a pruning pass, want 1 (the stale claim gone, the new confirmation kept)", store.Len())
	}
}

// WrapTx: the handler's write and the confirmation commit together. A
// second delivery of the same message (as after a crash between the
// commit and the ack) is a duplicate and writes nothing; a failed attempt
// rolls its write back.
func TestWrapTxOneCommit(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		s := sqltest.Store(t, db, d)
		effects := testenv.Table("t_effects")
		if _, err := db.ExecContext(t.Context(), "CREATE TABLE "+effects+" (id VARCHAR(64) NOT NULL, n INTEGER NOT NULL)"); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _, _ = db.ExecContext(context.Background(), "DROP TABLE "+effects) })
		ins := "INSERT INTO " + effects + " (id, n) VALUES (?, ?)"
		if d == sqlstore.Postgres {
			ins = "INSERT INTO " + effects + " (id, n) VALUES ($1, $2)"
		}
		r := newRig(t, brokertest.MemoryURL(t))
		in := inbox.New(s.Inbox(), "shipping")
		var runs atomic.Int32
		h, err := inbox.WrapTx(in, func(ctx context.Context, tx *sql.Tx, m acemq.Message[job]) acemq.Ack {
			runs.Add(1)
			if _, err := tx.ExecContext(ctx, ins, m.Envelope.ID(), m.Payload.N); err != nil {
				return acemq.Retry(err)
			}
			if m.Payload.N < 0 {
				return acemq.Reject(errors.New("negative"))
			}
			return acemq.Accept()
		})
		if err != nil {
			t.Fatal(err)
		}
		r.consume(h)
		env := acemq.MustEnvelope(acemq.Fields{})
		r.send(env, 1)
		r.wait(1)
		r.send(env, 1)
		r.send(acemq.MustEnvelope(acemq.Fields{}), -1)
		ss := r.wait(3)
		var rows int
		if err := db.QueryRowContext(t.Context(), "SELECT COUNT(*) FROM "+effects).Scan(&rows); err != nil {
			t.Fatal(err)
		}
		if rows != 1 || runs.Load() != 2 {
			t.Fatalf("%d effect rows after %d runs; want 1 row (the duplicate skipped, the rejection rolled back)", rows, runs.Load())
		}
		if ss[1].Outcome != acemq.OutcomeDuplicate || ss[2].Outcome != acemq.OutcomeRejected {
			t.Errorf("outcomes %s, %s", ss[1].Outcome, ss[2].Outcome)
		}
	})
}

// A key longer than the SQL column is stored hashed, and still dedupes.
func TestLongKeys(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		in := inbox.New(sqltest.Store(t, db, d).Inbox(), "c", inbox.WithKey(func(e acemq.Envelope) string { return strings.Repeat("k", 500) + e.Type() }))
		var runs int
		h := inbox.Wrap(in, func(context.Context, acemq.Message[job]) acemq.Ack { runs++; return acemq.Accept() })
		m := acemq.Message[job]{Envelope: acemq.MustEnvelope(acemq.Fields{Type: "a"})}
		h(t.Context(), m)
		if ack := h(t.Context(), m); !ack.IsDuplicate() || runs != 1 {
			t.Fatalf("second run: %v, runs %d", ack, runs)
		}
		if ack := h(t.Context(), acemq.Message[job]{Envelope: acemq.MustEnvelope(acemq.Fields{Type: "b"})}); ack.IsDuplicate() {
			t.Fatal("two long keys differing at the end were taken for one")
		}
	})
}
