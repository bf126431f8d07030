package outbox_test

import (
	"context"
	"database/sql"
	"errors"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/sqltest"
	"github.com/acemq/acemq/internal/storetest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/outbox/pgnotify"
	"github.com/acemq/acemq/sqlstore"
)

type order struct {
	ID    int    `json:"id"`
	Total string `json:"total"`
}

// collect consumes q and hands every delivery to the returned channel.
func collect(t *testing.T, c *acemq.Conn, q string) <-chan acemq.Message[order] {
	ch := make(chan acemq.Message[order], 1000)
	cons, err := acemq.Consume(t.Context(), c, q, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		ch <- m
		return acemq.Accept()
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cons.Close(context.Background()) })
	return ch
}

func next(t *testing.T, ch <-chan acemq.Message[order]) acemq.Message[order] {
	t.Helper()
	select {
	case m := <-ch:
		return m
	case <-time.After(testenv.Patience):
		t.Fatal("no delivery")
	}
	panic("unreachable")
}

// A record goes out whole: same id, typed headers, body and content type,
// in the order recorded.
func TestRelayPublishesWholeRecordsInOrder(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "outbox")
		store := outbox.NewMemory()
		pub := outbox.NewPublisher[order](store, "")
		env := acemq.MustEnvelope(acemq.Fields{Type: "order.placed", Headers: map[string]any{
			"x-tenant": int32(42), "big": int64(1) << 40, "ratio": 0.5, "raw": []byte{1, 2}, "nested": map[string]any{"n": int16(3)},
		}})
		sent, err := pub.Send(t.Context(), nil, q, order{ID: 1, Total: "9.99"}, outbox.WithEnvelope(env))
		if err != nil {
			t.Fatal(err)
		}
		for i := 2; i <= 20; i++ {
			if _, err := pub.Send(t.Context(), nil, q, order{ID: i}); err != nil {
				t.Fatal(err)
			}
		}
		n, err := outbox.NewRelay(c, store).Flush(t.Context())
		if err != nil || n != 20 {
			t.Fatalf("flush: %d, %v", n, err)
		}
		if store.Len() != 0 {
			t.Errorf("%d records left after a flush", store.Len())
		}
		ch := collect(t, c, q)
		m := next(t, ch)
		if m.Envelope.ID() != sent.ID() || m.Envelope.ID() != env.ID() || m.Envelope.Type() != "order.placed" || m.Payload.Total != "9.99" || m.ContentType != "application/json" {
			t.Errorf("delivered %+v, envelope %v", m.Payload, m.Envelope)
		}
		for k, want := range env.Headers() {
			got, _ := m.Envelope.Header(k)
			if msg := storetest.DiffValue(got, want); msg != "" {
				t.Errorf("header %s: %s", k, msg)
			}
		}
		if v, _ := m.Envelope.Header("x-tenant"); v != int32(42) {
			t.Errorf("x-tenant arrived as %T %v, want int32 42", v, v)
		}
		for i := 2; i <= 20; i++ {
			if m := next(t, ch); m.Payload.ID != i {
				t.Fatalf("delivery %d is order %d", i, m.Payload.ID)
			}
		}
	})
}

// A record nothing routes fails each attempt, backs off, and retires after
// the last, with its reason; Revive puts it back.
func TestRelayRetires(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		store := outbox.NewMemory()
		pub := outbox.NewPublisher[order](store, "")
		if _, err := pub.Send(t.Context(), nil, testenv.Unique(t, "nowhere"), order{ID: 1}); err != nil {
			t.Fatal(err)
		}
		var mu sync.Mutex
		var retired []outbox.Record
		r := outbox.NewRelay(c, store, outbox.WithMaxAttempts(3), outbox.WithBackoff(time.Millisecond, time.Millisecond),
			outbox.WithOnRetire(func(rec outbox.Record) { mu.Lock(); retired = append(retired, rec); mu.Unlock() }))
		testenv.Eventually(t, "the record to retire", func() bool {
			if _, err := r.Flush(t.Context()); err != nil {
				t.Fatal(err)
			}
			mu.Lock()
			defer mu.Unlock()
			return len(retired) == 1
		})
		ret, _ := store.Retired(t.Context(), 0)
		if len(ret) != 1 || ret[0].Attempts != 3 || ret[0].LastError == "" {
			t.Fatalf("retired %+v", ret)
		}
		st, _ := store.Status(t.Context())
		if len(st) != 1 || st[0].Retired != 1 || st[0].Pending != 0 {
			t.Errorf("status %+v", st)
		}
		if n, _ := r.Flush(t.Context()); n != 0 {
			t.Errorf("a retired record was relayed again")
		}
		if n, _ := store.Revive(t.Context()); n != 1 {
			t.Errorf("revived %d", n)
		}
		if n, _ := r.Flush(t.Context()); n != 1 {
			t.Errorf("a revived record was not relayed: %d", n)
		}
	})
}

func TestRelayOptionsChecked(t *testing.T) {
	c := brokertest.Connect(t, brokertest.MemoryURL(t))
	for _, o := range []outbox.RelayOption{outbox.WithBatchSize(0), outbox.WithInterval(0), outbox.WithMaxAttempts(0), outbox.WithBackoff(time.Second, time.Millisecond)} {
		if err := outbox.NewRelay(c, outbox.NewMemory(), o).Run(t.Context()); err == nil {
			t.Errorf("%v accepted", o)
		}
	}
	if _, err := outbox.NewPublisher[order](nil, "").Send(t.Context(), nil, "k", order{}); err == nil {
		t.Error("a nil store was accepted")
	}
}

// On PostgreSQL, the record is written in the application's transaction:
// a rollback records nothing, a commit wakes the relay through
// LISTEN/NOTIFY, well before its (here one-minute) poll.
func TestPostgresOutboxEndToEnd(t *testing.T) {
	db := sqltest.Open(t, sqlstore.Postgres)
	s := sqltest.Store(t, db, sqlstore.Postgres)
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "pgoutbox")
		store := s.Outbox()
		pub := outbox.NewPublisher[order](store, "")
		ctx, cancel := context.WithCancel(t.Context())
		var wg sync.WaitGroup
		relay := outbox.NewRelay(c, store, outbox.WithInterval(time.Minute), outbox.WithNotifier(pgnotify.New(db, s.NotifyChannel())),
			outbox.WithOnError(func(err error) { t.Errorf("relay: %v", err) }))
		wg.Go(func() { _ = relay.Run(ctx) })
		defer func() { cancel(); wg.Wait() }()
		ch := collect(t, c, q)

		tx := begin(t, db)
		if _, err := pub.Send(t.Context(), tx, q, order{ID: -1}); err != nil {
			t.Fatal(err)
		}
		if err := tx.Rollback(); err != nil {
			t.Fatal(err)
		}
		// Give the LISTEN time to start before the commit under test.
		time.Sleep(200 * time.Millisecond)
		tx = begin(t, db)
		env, err := pub.Send(t.Context(), tx, q, order{ID: 7, Total: "1.00"}, outbox.WithEnvelope(acemq.MustEnvelope(acemq.Fields{Headers: map[string]any{"n": int32(5)}})))
		if err != nil {
			t.Fatal(err)
		}
		start := time.Now()
		if err := tx.Commit(); err != nil {
			t.Fatal(err)
		}
		m := next(t, ch)
		took := time.Since(start)
		if m.Payload.ID != 7 || m.Envelope.ID() != env.ID() {
			t.Fatalf("delivered %+v (%s), want order 7 (%s); a rolled-back record must never go out", m.Payload, m.Envelope.ID(), env.ID())
		}
		if v, _ := m.Envelope.Header("n"); v != int32(5) {
			t.Errorf("header n arrived as %T %v", v, v)
		}
		t.Logf("commit to delivery through LISTEN/NOTIFY: %v", took)
	})
}

func begin(t *testing.T, db *sql.DB) *sql.Tx {
	tx, err := db.BeginTx(t.Context(), nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := tx.Rollback(); err != nil && !errors.Is(err, sql.ErrTxDone) {
			t.Error(err)
		}
	})
	return tx
}
