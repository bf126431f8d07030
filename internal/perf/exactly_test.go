package perf

import (
	"context"
	"database/sql"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/inbox"
	"github.com/acemq/acemq/internal/sqltest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/outbox/pgnotify"
	"github.com/acemq/acemq/sqlstore"
)

// BenchmarkExactlyOnce measures what exactly-once effects cost, side by
// side in one run against the same RabbitMQ and PostgreSQL:
//
//   - publish16: 16 goroutines. raw is amqp091 with the full envelope's
//     headers, publishing with a deferred confirm and waiting for it;
//     acemq is Publisher.Send; outbox is, per message, a PostgreSQL
//     transaction holding outbox.Publisher.Send and COMMIT, then a wait
//     until the relay (one, woken by LISTEN/NOTIFY) has the broker's
//     confirm for it. commit-ms is the outbox side's commit → confirmed
//     publish time (p50 and p99).
//   - drain: a backlog of b.N messages: acemq is Publisher.SendAll in
//     batches of 1,000; outbox is b.N records already committed (not
//     timed) drained by one relay (batches of 100, confirmed, deleted).
//   - commit16: what PostgreSQL alone gives 16 goroutines committing
//     one-row transactions, without and with a pg_notify in each (the
//     outbox's notify serialises commits).
//   - consume8: 8 handlers, prefetch 200, a filled quorum queue. raw and
//     acemq ack without work; acemq-tx runs, per message, a transaction
//     that inserts one row; inbox is inbox.WrapTx with the same insert
//     (claim, transaction, insert, confirmation, commit).
func BenchmarkExactlyOnce(b *testing.B) {
	url := brokerURL(b)
	db := sqltest.Open(b, sqlstore.Postgres)
	b.Run("publish16", func(b *testing.B) {
		compare(b,
			side{"raw", func(b *testing.B) { rawPublishConcurrent(b, url, true, 0) }},
			side{"acemq", func(b *testing.B) { acemqSend(b, url, 0) }},
			side{"outbox", func(b *testing.B) { outboxSend(b, url, db, senders) }})
	})
	b.Run("publish1", func(b *testing.B) {
		compare(b,
			side{"acemq", func(b *testing.B) { acemqSendOne(b, url) }},
			side{"outbox", func(b *testing.B) { outboxSend(b, url, db, 1) }})
	})
	b.Run("drain", func(b *testing.B) {
		compare(b,
			side{"acemq", func(b *testing.B) { acemqSendAll(b, url) }},
			side{"outbox", func(b *testing.B) { outboxDrain(b, url, db) }})
	})
	b.Run("commit16", func(b *testing.B) {
		compare(b,
			side{"plain", func(b *testing.B) { commits(b, db, false) }},
			side{"notify", func(b *testing.B) { commits(b, db, true) }})
	})
	b.Run("consume8", func(b *testing.B) {
		compare(b,
			side{"raw", func(b *testing.B) { rawConsume(b, url, 8, 0) }},
			side{"acemq", func(b *testing.B) { acemqConsume(b, url, 8, 0) }},
			side{"acemq-tx", func(b *testing.B) { dbConsume(b, url, db, false) }},
			side{"inbox", func(b *testing.B) { dbConsume(b, url, db, true) }})
	})
}

// observed wraps a store to report each record the broker confirmed.
type observed struct {
	outbox.Store
	confirmed func(id string)
}

func (o observed) Relay(ctx context.Context, now time.Time, limit int, f func([]outbox.Record) []outbox.Result) (int, error) {
	return o.Store.Relay(ctx, now, limit, func(rs []outbox.Record) []outbox.Result {
		res := f(rs)
		for i, r := range res {
			if r.Published {
				o.confirmed(rs[i].MessageID)
			}
		}
		return res
	})
}

func outboxSend(b *testing.B, url string, db *sql.DB, goroutines int) {
	b.StopTimer()
	q := declare(b, url, quorum)
	c := connect(b, url, acemq.WithMaxOutstanding(window))
	s := sqltest.Store(b, db, sqlstore.Postgres)
	var waiting sync.Map // id → chan struct{}
	store := observed{Store: s.Outbox(), confirmed: func(id string) {
		if ch, ok := waiting.LoadAndDelete(id); ok {
			close(ch.(chan struct{}))
		}
	}}
	relay := outbox.NewRelay(c, store, outbox.WithNotifier(pgnotify.New(db, s.NotifyChannel())))
	rctx, stop := context.WithCancel(context.Background())
	var rwg sync.WaitGroup
	rwg.Go(func() { _ = relay.Run(rctx) })
	defer func() { stop(); rwg.Wait() }()
	time.Sleep(100 * time.Millisecond) // the LISTEN is up
	pub := outbox.NewPublisher[Order](s.Outbox(), "")
	ctx := ctxFor(b, 10*time.Minute)
	var lat Latencies
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.StartTimer()
	m := startMeter()
	for range goroutines {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				env := newFullEnvelope()
				ch := make(chan struct{})
				waiting.Store(env.ID(), ch)
				tx, err := db.BeginTx(ctx, nil)
				if err != nil {
					b.Error(err)
					return
				}
				if _, err := pub.Send(ctx, tx, q, NewOrderCached(), outbox.WithEnvelope(env)); err != nil {
					_ = tx.Rollback()
					b.Error(err)
					return
				}
				start := time.Now()
				if err := tx.Commit(); err != nil {
					b.Error(err)
					return
				}
				select {
				case <-ch:
					lat.Since(start)
				case <-time.After(testenv.Patience):
					b.Error("a committed record was not published")
					return
				}
			}
		})
	}
	wg.Wait()
	m.Stop(b, b.N)
	sum := lat.Summary()
	b.ReportMetric(float64(sum.P50.Microseconds())/1000, "commit-p50-ms")
	b.ReportMetric(float64(sum.P99.Microseconds())/1000, "commit-p99-ms")
}

// dbConsume drains a filled queue with 8 handlers that each insert one
// row per message: in a transaction of their own, or through inbox.WrapTx.
func dbConsume(b *testing.B, url string, db *sql.DB, withInbox bool) {
	q := filledQueue(b, url)
	s := sqltest.Store(b, db, sqlstore.Postgres)
	effects := testenv.Table("perf_effects")
	if _, err := db.Exec("CREATE TABLE " + effects + " (id VARCHAR(64) NOT NULL)"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + effects) })
	insert := "INSERT INTO " + effects + " (id) VALUES ($1)"
	c := connect(b, url)
	done := NewCountdown(b.N)
	var h acemq.Handler[Order]
	if withInbox {
		var err error
		h, err = inbox.WrapTx(inbox.New(s.Inbox(), "perf"), func(ctx context.Context, tx *sql.Tx, m acemq.Message[Order]) acemq.Ack {
			if _, err := tx.ExecContext(ctx, insert, m.Envelope.ID()); err != nil {
				return acemq.Retry(err)
			}
			return acemq.Accept()
		})
		if err != nil {
			b.Fatal(err)
		}
	} else {
		h = func(ctx context.Context, m acemq.Message[Order]) acemq.Ack {
			tx, err := db.BeginTx(ctx, nil)
			if err != nil {
				return acemq.Retry(err)
			}
			if _, err := tx.ExecContext(ctx, insert, m.Envelope.ID()); err != nil {
				_ = tx.Rollback()
				return acemq.Retry(err)
			}
			if err := tx.Commit(); err != nil {
				return acemq.Retry(err)
			}
			return acemq.Accept()
		}
	}
	b.ReportAllocs()
	b.StartTimer()
	m := startMeter()
	cons, err := acemq.Consume(ctxFor(b, time.Minute), c, q, func(ctx context.Context, msg acemq.Message[Order]) acemq.Ack {
		a := h(ctx, msg)
		done.Tick()
		return a
	}, acemq.WithConcurrency(8), acemq.WithPrefetch(prefetch), acemq.WithDeclarations(false))
	if err != nil {
		b.Fatal(err)
	}
	select {
	case <-done.Done():
	case <-time.After(stallTimeout):
		_ = cons.Close(context.Background())
		b.Fatalf("only %d of %d messages handled within %s", b.N-done.Left(), b.N, stallTimeout)
	}
	m.Stop(b, b.N)
	if err := cons.Close(ctxFor(b, time.Minute)); err != nil {
		b.Error(err)
	}
}

// acemqSendOne is acemqSend with one goroutine, timing each confirm.
func acemqSendOne(b *testing.B, url string) {
	q := declare(b, url, quorum)
	c := connect(b, url)
	p := acemq.NewPublisher[Order](c, "")
	ctx := ctxFor(b, 10*time.Minute)
	var lat Latencies
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeter()
	for range b.N {
		start := time.Now()
		if _, err := p.Send(ctx, q, NewOrderCached(), acemq.WithEnvelope(newFullEnvelope())); err != nil {
			b.Fatal(err)
		}
		lat.Since(start)
	}
	m.Stop(b, b.N)
	sum := lat.Summary()
	b.ReportMetric(float64(sum.P50.Microseconds())/1000, "commit-p50-ms")
	b.ReportMetric(float64(sum.P99.Microseconds())/1000, "commit-p99-ms")
}

// outboxDrain times one relay publishing a backlog of b.N records.
func outboxDrain(b *testing.B, url string, db *sql.DB) {
	b.StopTimer()
	q := declare(b, url, quorum)
	c := connect(b, url, acemq.WithMaxOutstanding(window))
	s := sqltest.Store(b, db, sqlstore.Postgres)
	pub := outbox.NewPublisher[Order](s.Outbox(), "")
	ctx := ctxFor(b, 10*time.Minute)
	batch := make([]acemq.Outgoing[Order], 0, window)
	for sent := 0; sent < b.N; sent += len(batch) {
		batch = batch[:0]
		for i := 0; i < window && sent+i < b.N; i++ {
			batch = append(batch, acemq.Outgoing[Order]{RoutingKey: q, Payload: NewOrderCached(), Envelope: newFullEnvelope()})
		}
		if _, err := pub.SendAll(ctx, db, batch); err != nil {
			b.Fatal(err)
		}
	}
	relay := outbox.NewRelay(c, s.Outbox())
	b.ReportAllocs()
	b.StartTimer()
	m := startMeter()
	n, err := relay.Flush(ctx)
	m.Stop(b, b.N)
	if err != nil || n != b.N {
		b.Fatalf("flushed %d of %d: %v", n, b.N, err)
	}
}

// commits runs b.N one-row transactions from 16 goroutines.
func commits(b *testing.B, db *sql.DB, notify bool) {
	b.StopTimer()
	table := testenv.Table("perf_commits")
	if _, err := db.Exec("CREATE TABLE " + table + " (i INTEGER)"); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _, _ = db.Exec("DROP TABLE IF EXISTS " + table) })
	var next atomic.Int64
	var wg sync.WaitGroup
	b.StartTimer()
	m := startMeter()
	for range senders {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				tx, err := db.Begin()
				if err != nil {
					b.Error(err)
					return
				}
				_, err = tx.Exec("INSERT INTO " + table + " VALUES (1)")
				if err == nil && notify {
					_, err = tx.Exec("SELECT pg_notify('perf_commits', '')")
				}
				if err == nil {
					err = tx.Commit()
				}
				if err != nil {
					_ = tx.Rollback()
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	m.Stop(b, b.N)
}
