// Package outbox is the outbox command: status, retired and revive on a
// transactional outbox's table (package outbox, through sqlstore).
package outbox

import (
	"context"
	"database/sql"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"os"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/outbox"
	"github.com/acemq/acemq/sqlstore"
	_ "github.com/go-sql-driver/mysql" // "mysql"
	_ "github.com/jackc/pgx/v5/stdlib" // "pgx"
	"github.com/spf13/cobra"
)

// Options are outbox's flags and its subcommand, read by NewCmd's command.
type Options struct {
	cli.Invocation

	dsn     string
	table   string
	json    bool
	seqs    []int64
	all     bool
	limit   int
	timeout time.Duration
}

// NewCmd is the outbox command. When runF is not nil it runs instead of
// the command's own Run, once the flags are read and valid.
func NewCmd(runF func(*Options) error) *cobra.Command {
	f := &Options{}
	cmd := &cobra.Command{
		Use:   "outbox status|retired|revive --dsn DSN",
		Short: "Look into a transactional outbox table and put retired records back",
		Long: `outbox reads the outbox table package outbox keeps through sqlstore.

  status   pending and retired records and the oldest pending record's age,
           per destination (exchange and routing key)
  retired  the retired records, oldest first, with their attempts and last error
  revive   puts retired records back (--seq N, repeatable, or --all): due now,
           attempts reset; a running relay publishes them

--dsn is postgres://… (or postgresql://…) for PostgreSQL, else a MySQL/MariaDB
DSN in go-sql-driver's form (user:pass@tcp(host:3306)/db), optionally written
mysql://user:pass@tcp(host:3306)/db. Default: $ACEMQ_OUTBOX_DSN.

Exit codes: 0 success; 1 anything else (no database, no table, a bad flag).`,
		Example: `  acemq outbox status --dsn postgres://app@db:5432/shop
  acemq outbox status --dsn 'root@tcp(127.0.0.1:3306)/shop' --json
  acemq outbox retired --dsn postgres://app@db:5432/shop
  acemq outbox revive --dsn postgres://app@db:5432/shop --seq 1042 --seq 1043`,
		Args:      cobra.ExactArgs(1),
		ValidArgs: []string{"status", "retired", "revive"},
		RunE:      cli.RunE(f, runF),
	}
	fl := cmd.Flags()
	fl.StringVar(&f.dsn, "dsn", "", "the database (default $ACEMQ_OUTBOX_DSN)")
	fl.StringVar(&f.table, "table", sqlstore.DefaultOutboxTable, "the outbox table")
	fl.BoolVar(&f.json, "json", false, "print JSON")
	fl.Int64SliceVar(&f.seqs, "seq", nil, "revive: the record's seq (repeatable)")
	fl.BoolVar(&f.all, "all", false, "revive: every retired record")
	fl.IntVar(&f.limit, "limit", 100, "retired: at most this many records")
	fl.DurationVar(&f.timeout, "timeout", 30*time.Second, "give up after this long")
	return cmd
}

// openOutbox opens the database named by dsn and the store's outbox.
func openOutbox(dsn, table string) (*sql.DB, *sqlstore.Outbox, error) {
	if dsn == "" {
		dsn = os.Getenv("ACEMQ_OUTBOX_DSN")
	}
	if dsn == "" {
		return nil, nil, errors.New("outbox needs --dsn (or $ACEMQ_OUTBOX_DSN): postgres://user@host:5432/db, or user:pass@tcp(host:3306)/db for MySQL/MariaDB")
	}
	driver, dialect := "mysql", sqlstore.MySQL
	switch {
	case strings.HasPrefix(dsn, "postgres://"), strings.HasPrefix(dsn, "postgresql://"):
		driver, dialect = "pgx", sqlstore.Postgres
	case strings.HasPrefix(dsn, "mysql://"):
		dsn = strings.TrimPrefix(dsn, "mysql://")
	}
	db, err := sql.Open(driver, dsn)
	if err != nil {
		return nil, nil, fmt.Errorf("opening the database: %w", err)
	}
	s, err := sqlstore.New(db, dialect, sqlstore.WithOutboxTable(table))
	if err != nil {
		db.Close()
		return nil, nil, err
	}
	return db, s.Outbox(), nil
}

// StatusJSON is what outbox status --json prints.
type StatusJSON struct {
	Pending      int                  `json:"pending"`
	Retired      int                  `json:"retired"`
	Destinations []outboxDestinationJ `json:"destinations"`
}

type outboxDestinationJ struct {
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routingKey"`
	Pending    int    `json:"pending"`
	Retired    int    `json:"retired"`
	// OldestPendingAgeSeconds is 0 when nothing is pending.
	OldestPendingAgeSeconds float64 `json:"oldestPendingAgeSeconds"`
	OldestPending           string  `json:"oldestPending,omitempty"`
}

// RecordJSON is one record of outbox retired --json.
type RecordJSON struct {
	Seq        int64  `json:"seq"`
	MessageID  string `json:"messageId"`
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routingKey"`
	Attempts   int    `json:"attempts"`
	LastError  string `json:"lastError"`
	Recorded   string `json:"recorded"`
	Retired    string `json:"retired"`
}

// Validate checks the subcommand and its flags before the database is
// opened.
func (f *Options) Validate() error {
	sub := f.Args[0]
	if sub != "status" && sub != "retired" && sub != "revive" {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("unknown outbox subcommand %q: use status, retired or revive", sub))
	}
	if sub == "revive" && !f.all && len(f.seqs) == 0 {
		return cli.WithCode(cli.ExitFailure, errors.New("outbox revive needs --seq N (repeatable) or --all"))
	}
	return nil
}

// Run runs the subcommand.
func (f *Options) Run() error {
	ctx, w, sub := f.Cmd.Context(), f.Cmd.OutOrStdout(), f.Args[0]
	db, ob, err := openOutbox(f.dsn, f.table)
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	defer db.Close()
	ctx, cancel := context.WithTimeout(ctx, f.timeout)
	defer cancel()
	switch sub {
	case "status":
		st, err := ob.Status(ctx)
		if err != nil {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("reading the outbox table %s: %w", f.table, err))
		}
		return printOutboxStatus(w, st, f.json, time.Now())
	case "retired":
		recs, err := ob.Retired(ctx, f.limit)
		if err != nil {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("reading the outbox table %s: %w", f.table, err))
		}
		return printRetired(w, recs, f.json)
	}
	seqs := f.seqs
	if f.all {
		seqs = nil
	}
	n, err := ob.Revive(ctx, seqs...)
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	if f.json {
		return json.NewEncoder(w).Encode(map[string]int{"revived": n})
	}
	fmt.Fprintf(w, "revived %d retired record(s); a running relay publishes them now\n", n)
	return nil
}

func printOutboxStatus(w io.Writer, st []outbox.DestinationStatus, asJSON bool, now time.Time) error {
	out := StatusJSON{Destinations: []outboxDestinationJ{}}
	for _, d := range st {
		j := outboxDestinationJ{Exchange: d.Exchange, RoutingKey: d.RoutingKey, Pending: d.Pending, Retired: d.Retired}
		if !d.OldestPending.IsZero() {
			j.OldestPendingAgeSeconds = max(0, now.Sub(d.OldestPending).Seconds())
			j.OldestPending = d.OldestPending.UTC().Format(time.RFC3339Nano)
		}
		out.Pending += d.Pending
		out.Retired += d.Retired
		out.Destinations = append(out.Destinations, j)
	}
	if asJSON {
		return json.NewEncoder(w).Encode(out)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "EXCHANGE\tROUTING KEY\tPENDING\tRETIRED\tOLDEST PENDING")
	for _, d := range out.Destinations {
		age := "-"
		if d.OldestPending != "" {
			age = (time.Duration(d.OldestPendingAgeSeconds * float64(time.Second))).Round(time.Millisecond).String()
		}
		ex := d.Exchange
		if ex == "" {
			ex = "(default)"
		}
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%s\n", ex, d.RoutingKey, d.Pending, d.Retired, age)
	}
	fmt.Fprintf(tw, "total\t\t%d\t%d\t\n", out.Pending, out.Retired)
	return tw.Flush()
}

func printRetired(w io.Writer, recs []outbox.Record, asJSON bool) error {
	out := []RecordJSON{}
	for _, r := range recs {
		out = append(out, RecordJSON{Seq: r.Seq, MessageID: r.MessageID, Exchange: r.Exchange, RoutingKey: r.RoutingKey,
			Attempts: r.Attempts, LastError: r.LastError, Recorded: r.Recorded.UTC().Format(time.RFC3339Nano), Retired: r.Retired.UTC().Format(time.RFC3339Nano)})
	}
	if asJSON {
		return json.NewEncoder(w).Encode(out)
	}
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "SEQ\tMESSAGE ID\tEXCHANGE\tROUTING KEY\tATTEMPTS\tRETIRED\tLAST ERROR")
	for _, r := range out {
		fmt.Fprintf(tw, "%d\t%s\t%s\t%s\t%d\t%s\t%s\n", r.Seq, r.MessageID, r.Exchange, r.RoutingKey, r.Attempts, r.Retired, r.LastError)
	}
	return tw.Flush()
}
