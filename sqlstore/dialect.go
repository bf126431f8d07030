package sqlstore

import (
	"strconv"
	"strings"
)

// Dialect is what differs between the databases the store speaks:
// placeholders, column types, upserts, index syntax. The store needs
// nothing else from the driver than database/sql.
type Dialect struct {
	name string
	// dollar: placeholders are $1, $2, … (else ?).
	dollar bool
	// notify: Add wakes relays with pg_notify in the recording
	// transaction.
	notify bool
}

// The dialects.
var (
	// Postgres is PostgreSQL (10 or later: FOR UPDATE SKIP LOCKED, ON
	// CONFLICT). Open the *sql.DB with any database/sql driver for
	// PostgreSQL; this module's tests and package outbox/pgnotify use
	// pgx's (github.com/jackc/pgx/v5/stdlib, driver name "pgx").
	Postgres = Dialect{name: "postgres", dollar: true, notify: true}
	// MySQL is MySQL 8.0.1 or later and MariaDB 10.6 or later (FOR UPDATE
	// SKIP LOCKED), through github.com/go-sql-driver/mysql or another
	// driver.
	MySQL = Dialect{name: "mysql"}
)

// String is the dialect's name: postgres or mysql.
func (d Dialect) String() string { return d.name }

// bind rewrites the ? placeholders of q for the dialect (none of the
// store's statements has a ? anywhere else).
func (d Dialect) bind(q string) string {
	if !d.dollar {
		return q
	}
	var b strings.Builder
	n := 0
	for _, r := range q {
		if r == '?' {
			n++
			b.WriteByte('$')
			b.WriteString(strconv.Itoa(n))
			continue
		}
		b.WriteRune(r)
	}
	return b.String()
}

// ddl returns the statements that create a table and its indexes.
type tableDDL struct {
	columns []string // column definitions, PRIMARY KEY included
	indexes []index
}

type index struct {
	suffix string
	cols   string
	where  string // PostgreSQL partial index condition
}

func (d Dialect) createTable(table string, t tableDDL) []string {
	base := indexBase(table)
	if d.dollar {
		out := []string{"CREATE TABLE IF NOT EXISTS " + table + " (\n  " + strings.Join(t.columns, ",\n  ") + "\n)"}
		for _, ix := range t.indexes {
			s := "CREATE INDEX IF NOT EXISTS " + base + "_" + ix.suffix + " ON " + table + " (" + ix.cols + ")"
			if ix.where != "" {
				s += " WHERE " + ix.where
			}
			out = append(out, s)
		}
		return out
	}
	cols := append([]string(nil), t.columns...)
	for _, ix := range t.indexes {
		cols = append(cols, "INDEX "+base+"_"+ix.suffix+" ("+ix.cols+")")
	}
	return []string{"CREATE TABLE IF NOT EXISTS " + table + " (\n  " + strings.Join(cols, ",\n  ") +
		"\n) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4 COLLATE=utf8mb4_bin"}
}

// indexBase is the table's name without its schema, for index names.
func indexBase(table string) string {
	if i := strings.LastIndexByte(table, '.'); i >= 0 {
		return table[i+1:]
	}
	return table
}

// types of the dialect.
func (d Dialect) serial() string {
	if d.dollar {
		return "BIGSERIAL PRIMARY KEY"
	}
	return "BIGINT AUTO_INCREMENT PRIMARY KEY"
}

func (d Dialect) blob() string {
	if d.dollar {
		return "BYTEA"
	}
	return "LONGBLOB"
}

func (d Dialect) text() string {
	if d.dollar {
		return "TEXT"
	}
	return "LONGTEXT"
}

// insertOrNothing is an INSERT that does nothing (0 rows affected) when
// the primary key exists.
func (d Dialect) insertOrNothing(table, cols, values, firstCol string) string {
	if d.dollar {
		return "INSERT INTO " + table + " (" + cols + ") VALUES (" + values + ") ON CONFLICT DO NOTHING"
	}
	return "INSERT INTO " + table + " (" + cols + ") VALUES (" + values + ") ON DUPLICATE KEY UPDATE " + firstCol + " = " + firstCol
}
