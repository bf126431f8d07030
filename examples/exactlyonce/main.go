// Command exactlyonce places orders whose "order placed" messages go through
// a transactional outbox and are applied by an idempotent consumer: each
// order is charged once, even when its message is published twice.
//
// With -dsn postgres://… (or a MySQL DSN) the order rows, the outbox
// records, the inbox and the charges live in that database, and each
// order's row and its message commit in one transaction; without it, the
// memory stores stand in (no transaction, same flow).
//
//	go run ./examples/exactlyonce
//	go run ./examples/exactlyonce -dsn 'postgres://postgres@127.0.0.1:5432/test?sslmode=disable' -url amqp://guest:guest@127.0.0.1:5672/
package main

import (
	"context"
	"database/sql"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"strings"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/inbox"
	"github.com/acemq/acemq/outbox"
	_ "github.com/acemq/acemq/rabbitmq"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/sqlstore"
	"github.com/acemq/acemq/topology"
	_ "github.com/go-sql-driver/mysql"
	_ "github.com/jackc/pgx/v5/stdlib"
)

func main() {
	if err := run(context.Background(), os.Args[1:], os.Stdout); err != nil {
		fmt.Fprintln(os.Stderr, "exactlyonce:", err)
		os.Exit(1)
	}
}

// OrderPlaced is the message an order's transaction records.
type OrderPlaced struct {
	Order  string `json:"order"`
	Amount int    `json:"amount"`
}

// app is the example's database side: nil db means the memory stores.
type app struct {
	db      *sql.DB
	dialect sqlstore.Dialect
	store   *sqlstore.Store
	sfx     string

	mu      sync.Mutex
	charged map[string]int // memory mode: the charges
}

func (a *app) q(s string) string {
	if a.dialect == sqlstore.Postgres {
		for i := 1; strings.Contains(s, "?"); i++ {
			s = strings.Replace(s, "?", fmt.Sprintf("$%d", i), 1)
		}
	}
	return s
}

func run(ctx context.Context, args []string, out io.Writer) error {
	fs := flag.NewFlagSet("exactlyonce", flag.ContinueOnError)
	url := fs.String("url", envOr("ACEMQ_URL", "memory://exactlyonce"), "the broker")
	dsn := fs.String("dsn", "", "a database: postgres://… or user@tcp(host:3306)/db; empty for the memory stores")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := acemq.Connect(ctx, *url, acemq.WithName("acemq example exactlyonce"))
	if err != nil {
		return err
	}
	defer conn.Close(context.Background())

	a := &app{sfx: fmt.Sprintf("%d", time.Now().UnixNano()%1_000_000), charged: map[string]int{}}
	var obStore outbox.Store = outbox.NewMemory()
	var inStore inbox.Store = inbox.NewMemory()
	if *dsn != "" {
		if err := a.open(ctx, *dsn); err != nil {
			return err
		}
		defer a.close()
		obStore, inStore = a.store.Outbox(), a.store.Inbox()
	}

	queue := "exactlyonce-payments-" + a.sfx
	topo := topology.New().Queue(queue)
	if err := topo.Apply(ctx, conn); err != nil {
		return err
	}
	defer topo.Delete(context.Background(), conn)

	// The consumer: charges each order once.
	settled := make(chan acemq.Settlement, 32)
	defer conn.OnSettle(func(s acemq.Settlement) {
		if s.Queue == queue {
			settled <- s
		}
	})()
	h, err := a.handler(inbox.New(inStore, "payments"))
	if err != nil {
		return err
	}
	consumer, err := consume(ctx, conn, queue, h)
	if err != nil {
		return err
	}
	defer consumer.Close(context.Background())

	// The producer: an order row and its message, one transaction each.
	pub := outbox.NewPublisher[OrderPlaced](obStore, "")
	var envs []acemq.Envelope
	for i, amount := range []int{1250, 700, 9990} {
		o := OrderPlaced{Order: fmt.Sprintf("order-%d", i+1), Amount: amount}
		env, err := a.place(ctx, pub, queue, o)
		if err != nil {
			return err
		}
		envs = append(envs, env)
		fmt.Fprintf(out, "placed %s (%d cents), message %s recorded in the outbox\n", o.Order, o.Amount, env.ID()[:8])
	}

	relay := outbox.NewRelay(conn, obStore)
	n, err := relay.Flush(ctx) // in a service: go relay.Run(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "the relay published %d messages\n", n)

	// The same messages recorded again with their ids: what a relay that
	// died after its confirms and before deleting its batch publishes
	// after its restart.
	for i, env := range envs {
		if _, err := pub.Send(ctx, a.execer(), queue, OrderPlaced{Order: fmt.Sprintf("order-%d", i+1)}, outbox.WithEnvelope(env)); err != nil {
			return err
		}
	}
	if n, err = relay.Flush(ctx); err != nil {
		return err
	}
	fmt.Fprintf(out, "the relay published %d copies, as after a crash\n", n)

	counts := map[acemq.Outcome]int{}
	for counts[acemq.OutcomeAcked]+counts[acemq.OutcomeDuplicate] < 2*len(envs) {
		select {
		case s := <-settled:
			counts[s.Outcome]++
		case <-ctx.Done():
			return fmt.Errorf("waiting for the deliveries: %w", ctx.Err())
		}
	}
	charges, err := a.charges(ctx)
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "deliveries: %d acked, %d duplicate\n", counts[acemq.OutcomeAcked], counts[acemq.OutcomeDuplicate])
	fmt.Fprintf(out, "charges: %s\n", charges)
	return nil
}

// consume starts the consumer of queue. The inbox answers a store failure
// (a database that is briefly away) and the handler a failed insert with a
// retry, so the consumer needs a policy with more than one attempt: with
// the default, retry.None, either would dead-letter the message at once.
func consume(ctx context.Context, conn *acemq.Conn, queue string, h acemq.Handler[OrderPlaced]) (*acemq.Consumer, error) {
	return acemq.Consume(ctx, conn, queue, h,
		acemq.WithRetry(retry.Exponential(5, time.Second, 30*time.Second)))
}

func envOr(k, def string) string {
	if v := os.Getenv(k); v != "" {
		return v
	}
	return def
}

// open opens the database and creates the example's tables.
func (a *app) open(ctx context.Context, dsn string) error {
	driver := "mysql"
	a.dialect = sqlstore.MySQL
	if strings.HasPrefix(dsn, "postgres://") || strings.HasPrefix(dsn, "postgresql://") {
		driver, a.dialect = "pgx", sqlstore.Postgres
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return err
	}
	a.db = db
	s, err := sqlstore.New(db, a.dialect, sqlstore.WithInboxTable("ex_inbox_"+a.sfx),
		sqlstore.WithOutboxTable("ex_outbox_"+a.sfx), sqlstore.WithSagaTable("ex_saga_"+a.sfx))
	if err != nil {
		return err
	}
	a.store = s
	if err := s.CreateTables(ctx); err != nil {
		return err
	}
	for _, ddl := range []string{
		"CREATE TABLE ex_orders_" + a.sfx + " (id VARCHAR(64) NOT NULL, amount INTEGER NOT NULL)",
		"CREATE TABLE ex_charges_" + a.sfx + " (order_id VARCHAR(64) NOT NULL, amount INTEGER NOT NULL)",
	} {
		if _, err := db.ExecContext(ctx, ddl); err != nil {
			return err
		}
	}
	return nil
}

// close drops the example's tables (a demo cleans up after itself).
func (a *app) close() {
	ctx := context.Background()
	_ = a.store.DropTables(ctx)
	_, _ = a.db.ExecContext(ctx, "DROP TABLE IF EXISTS ex_orders_"+a.sfx)
	_, _ = a.db.ExecContext(ctx, "DROP TABLE IF EXISTS ex_charges_"+a.sfx)
	_ = a.db.Close()
}

func (a *app) execer() outbox.Execer {
	if a.db == nil {
		return nil
	}
	return a.db
}

// place writes the order and records its message in one transaction.
func (a *app) place(ctx context.Context, pub *outbox.Publisher[OrderPlaced], queue string, o OrderPlaced) (acemq.Envelope, error) {
	if a.db == nil {
		return pub.Send(ctx, nil, queue, o)
	}
	tx, err := a.db.BeginTx(ctx, nil)
	if err != nil {
		return acemq.Envelope{}, err
	}
	defer tx.Rollback()
	if _, err := tx.ExecContext(ctx, a.q("INSERT INTO ex_orders_"+a.sfx+" (id, amount) VALUES (?, ?)"), o.Order, o.Amount); err != nil {
		return acemq.Envelope{}, err
	}
	env, err := pub.Send(ctx, tx, queue, o)
	if err != nil {
		return acemq.Envelope{}, err
	}
	return env, tx.Commit()
}

// handler charges an order: in the inbox's transaction with a database,
// in memory otherwise.
func (a *app) handler(in *inbox.Inbox) (acemq.Handler[OrderPlaced], error) {
	if a.db == nil {
		return inbox.Wrap(in, func(_ context.Context, m acemq.Message[OrderPlaced]) acemq.Ack {
			a.mu.Lock()
			a.charged[m.Payload.Order] += m.Payload.Amount
			a.mu.Unlock()
			return acemq.Accept()
		}), nil
	}
	return inbox.WrapTx(in, func(ctx context.Context, tx *sql.Tx, m acemq.Message[OrderPlaced]) acemq.Ack {
		if _, err := tx.ExecContext(ctx, a.q("INSERT INTO ex_charges_"+a.sfx+" (order_id, amount) VALUES (?, ?)"), m.Payload.Order, m.Payload.Amount); err != nil {
			return acemq.Retry(err)
		}
		return acemq.Accept()
	})
}

// charges lists the charges per order, "order-1=1250 …", sorted.
func (a *app) charges(ctx context.Context) (string, error) {
	got := map[string]int{}
	if a.db == nil {
		a.mu.Lock()
		for k, v := range a.charged {
			got[k] = v
		}
		a.mu.Unlock()
	} else {
		rows, err := a.db.QueryContext(ctx, "SELECT order_id, amount FROM ex_charges_"+a.sfx)
		if err != nil {
			return "", err
		}
		defer rows.Close()
		for rows.Next() {
			var id string
			var amount int
			if err := rows.Scan(&id, &amount); err != nil {
				return "", err
			}
			got[id] += amount
		}
		if err := rows.Err(); err != nil {
			return "", err
		}
	}
	var parts []string
	for i := 1; i <= len(got); i++ {
		k := fmt.Sprintf("order-%d", i)
		v, ok := got[k]
		if !ok {
			return "", errors.New("an order was not charged")
		}
		parts = append(parts, fmt.Sprintf("%s=%d", k, v))
	}
	return strings.Join(parts, " "), nil
}
