package sqlstore_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/acemq/acemq/inbox"
	"github.com/acemq/acemq/internal/sqltest"
	"github.com/acemq/acemq/internal/storetest"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/saga"
	"github.com/acemq/acemq/sqlstore"
	"github.com/jackc/pgx/v5/stdlib"
)

func TestInboxStore(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		storetest.Inbox(t, func(t *testing.T) inbox.Store { return sqltest.Store(t, db, d).Inbox() })
	})
}

func TestOutboxStore(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		storetest.Outbox(t, func(t *testing.T) outbox.Store { return sqltest.Store(t, db, d).Outbox() })
	})
}

func TestNewRefusesBadNames(t *testing.T) {
	db := &sql.DB{}
	for _, name := range []string{"", "a b", "x;DROP TABLE y", "1abc", "a.b.c", `"quoted"`} {
		if _, err := sqlstore.New(db, sqlstore.Postgres, sqlstore.WithOutboxTable(name)); err == nil {
			t.Errorf("the table name %q was accepted", name)
		}
	}
	if _, err := sqlstore.New(db, sqlstore.Dialect{}); err == nil {
		t.Error("the zero Dialect was accepted")
	}
	s, err := sqlstore.New(db, sqlstore.Postgres, sqlstore.WithOutboxTable("app.events_outbox"))
	if err != nil {
		t.Fatal(err)
	}
	if s.NotifyChannel() != "app_events_outbox" {
		t.Errorf("channel %q", s.NotifyChannel())
	}
}

// The DDL is idempotent and names the configured tables; nothing is
// created until asked.
func TestDDL(t *testing.T) {
	for _, d := range []sqlstore.Dialect{sqlstore.Postgres, sqlstore.MySQL} {
		s, err := sqlstore.New(&sql.DB{}, d, sqlstore.WithInboxTable("my_inbox"))
		if err != nil {
			t.Fatal(err)
		}
		ddl := strings.Join(s.DDL(), ";\n")
		for _, want := range []string{"CREATE TABLE IF NOT EXISTS my_inbox", "CREATE TABLE IF NOT EXISTS acemq_outbox", "CREATE TABLE IF NOT EXISTS acemq_saga"} {
			if !strings.Contains(ddl, want) {
				t.Errorf("%s DDL lacks %q:\n%s", d, want, ddl)
			}
		}
	}
}

func TestCreateTablesTwice(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		s := sqltest.Store(t, db, d)
		if err := s.CreateTables(t.Context()); err != nil {
			t.Fatalf("a second CreateTables: %v", err)
		}
	})
}

func TestSagaLog(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		storetest.Saga(t, func(t *testing.T) saga.Log { return sqltest.Store(t, db, d).SagaLog() })
	})
}

// Add notifies the store's channel in the recording transaction;
// WithNotify(false) does not: the first notification after such an Add is
// the marker sent after it.
func TestNotify(t *testing.T) {
	db := sqltest.Open(t, sqlstore.Postgres)
	for _, on := range []bool{true, false} {
		s := sqltest.Store(t, db, sqlstore.Postgres, sqlstore.WithNotify(on))
		conn, err := db.Conn(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		err = conn.Raw(func(dc any) error {
			pc := dc.(*stdlib.Conn).Conn()
			defer pc.Close(context.Background())
			if _, err := pc.Exec(t.Context(), "LISTEN "+s.NotifyChannel()); err != nil {
				return err
			}
			if err := s.Outbox().Add(t.Context(), db, outbox.Record{MessageID: "x", RoutingKey: "q"}); err != nil {
				return err
			}
			if _, err := db.Exec("SELECT pg_notify($1, 'marker')", s.NotifyChannel()); err != nil {
				return err
			}
			n, err := pc.WaitForNotification(t.Context())
			if err != nil {
				return err
			}
			if want := map[bool]string{true: "", false: "marker"}[on]; n.Payload != want {
				t.Errorf("WithNotify(%v): the first notification is %q, want %q", on, n.Payload, want)
			}
			return nil
		})
		conn.Close()
		if err != nil {
			t.Fatal(err)
		}
	}
}
