package main

import (
	"database/sql"
	"encoding/json"
	"errors"
	"strings"
	"testing"
	"time"

	outboxcmd "github.com/acemq/acemq/internal/cli/outbox"
	"github.com/acemq/acemq/internal/sqltest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/sqlstore"
)

// outbox status, retired and revive on a table with a pending and a
// retired record, on each database.
func TestOutboxCommand(t *testing.T) {
	sqltest.Each(t, func(t *testing.T, db *sql.DB, d sqlstore.Dialect) {
		table := testenv.Table("t_cli_outbox")
		s := sqltest.Store(t, db, d, sqlstore.WithOutboxTable(table))
		dsn := testenv.PostgresDSN(t)
		if d == sqlstore.MySQL {
			dsn = testenv.MySQLDSN(t)
		}
		ob := s.Outbox()
		old := time.Now().Add(-time.Minute)
		if err := ob.Add(t.Context(), nil,
			outbox.Record{MessageID: "m1", Exchange: "orders", RoutingKey: "placed", Recorded: old},
			outbox.Record{MessageID: "m2", Exchange: "orders", RoutingKey: "placed", Recorded: old.Add(time.Second)},
		); err != nil {
			t.Fatal(err)
		}
		if _, err := ob.Relay(t.Context(), time.Now(), 1, func(rs []outbox.Record) []outbox.Result {
			return []outbox.Result{{Err: errors.New("NOT_FOUND - no exchange 'orders'"), Retire: true, Next: time.Now()}}
		}); err != nil {
			t.Fatal(err)
		}

		r := runCLI(t, "", "outbox", "status", "--dsn", dsn, "--table", table, "--json")
		if r.code != 0 {
			t.Fatalf("status: %d %s", r.code, r.stderr)
		}
		var st outboxcmd.StatusJSON
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil {
			t.Fatalf("%v: %s", err, r.stdout)
		}
		if st.Pending != 1 || st.Retired != 1 || len(st.Destinations) != 1 || st.Destinations[0].OldestPendingAgeSeconds < 50 {
			t.Errorf("status %+v", st)
		}
		if r := runCLI(t, "", "outbox", "status", "--dsn", dsn, "--table", table); r.code != 0 || !strings.Contains(r.stdout, "placed") {
			t.Errorf("status table: %d %q %s", r.code, r.stdout, r.stderr)
		}
		r = runCLI(t, "", "outbox", "retired", "--dsn", dsn, "--table", table, "--json")
		var recs []outboxcmd.RecordJSON
		if err := json.Unmarshal([]byte(r.stdout), &recs); err != nil || len(recs) != 1 || recs[0].MessageID != "m1" || !strings.Contains(recs[0].LastError, "NOT_FOUND") {
			t.Fatalf("retired: %v %s %s", err, r.stdout, r.stderr)
		}
		if r := runCLI(t, "", "outbox", "revive", "--dsn", dsn, "--table", table); r.code != 1 {
			t.Errorf("revive without --seq or --all: exit %d", r.code)
		}
		if r := runCLI(t, "", "outbox", "revive", "--dsn", dsn, "--table", table, "--seq", "999999", "--json"); r.code != 0 || !strings.Contains(r.stdout, `"revived":0`) {
			t.Errorf("revive of an unknown seq: %d %s %s", r.code, r.stdout, r.stderr)
		}
		r = runCLI(t, "", "outbox", "revive", "--dsn", dsn, "--table", table, "--all", "--json")
		if r.code != 0 || !strings.Contains(r.stdout, `"revived":1`) {
			t.Errorf("revive --all: %d %s %s", r.code, r.stdout, r.stderr)
		}
		r = runCLI(t, "", "outbox", "status", "--dsn", dsn, "--table", table, "--json")
		if err := json.Unmarshal([]byte(r.stdout), &st); err != nil || st.Pending != 2 || st.Retired != 0 {
			t.Errorf("after revive: %+v %v", st, err)
		}
	})
}

func TestOutboxCommandNeedsADSN(t *testing.T) {
	r := acemqEnv(t, []string{"ACEMQ_OUTBOX_DSN="}, "", "outbox", "status")
	if r.code != 1 || !strings.Contains(r.stderr, "--dsn") {
		t.Errorf("%d %q", r.code, r.stderr)
	}
}
