package outbox

import (
	"context"
	"database/sql"
	"time"
)

// Record is one stored message: everything its publish needs, kept whole
// (body bytes, content type, every header with its AMQP type), and its
// relay history.
type Record struct {
	// Seq is the store's sequence number: records of one destination are
	// published in Seq order.
	Seq         int64
	MessageID   string // the envelope id, also the AMQP message-id
	Exchange    string
	RoutingKey  string
	ContentType string
	// Headers holds the envelope and the application headers as the
	// publish writes them.
	Headers   map[string]any
	Body      []byte
	Mandatory bool
	Transient bool
	// Recorded is when the record was stored (millisecond precision).
	Recorded time.Time
	// Attempts counts failed publishes; LastError is the last one's reason.
	Attempts  int
	LastError string
	// Retired is when the relay gave up on the record (zero while it is
	// pending): it stays in the store, with LastError, until an operator
	// revives or deletes it.
	Retired time.Time
}

// Execer is what a store records through: the application's *sql.Tx (the
// record commits or rolls back with the application's own writes), or a
// *sql.DB or *sql.Conn. The memory store ignores it; pass nil.
type Execer interface {
	ExecContext(ctx context.Context, query string, args ...any) (sql.Result, error)
}

// Result is what became of one record of a batch, as the relay reports it
// to the store.
type Result struct {
	// Published: the broker confirmed it; the store deletes the record.
	Published bool
	// Err is the failure of a record that was not published. A nil Err
	// with Published false means the record was not tried (an earlier
	// record of its destination failed): it is left as it was.
	Err error
	// Next is when a failed record is due again.
	Next time.Time
	// Retire: the record failed its last allowed attempt and is set aside
	// with Err as its reason.
	Retire bool
}

// Store keeps the records. Implementations: NewMemory here, and
// sqlstore.Store.Outbox for PostgreSQL and MySQL/MariaDB.
type Store interface {
	// Add stores recs, through tx when the store is a database.
	Add(ctx context.Context, tx Execer, recs ...Record) error
	// Relay hands f at most limit pending records due at now, in Seq
	// order, each with every earlier pending record of its destination
	// already published or retired; no other Relay call is handed the same
	// records until this one returns. It then applies the results f
	// returns (one per record, in order) and reports how many records f
	// was given.
	Relay(ctx context.Context, now time.Time, limit int, f func([]Record) []Result) (int, error)
}

// DestinationStatus summarises the records of one destination.
type DestinationStatus struct {
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routing_key"`
	Pending    int    `json:"pending"`
	Retired    int    `json:"retired"`
	// OldestPending is when the oldest pending record was stored (zero
	// when none is pending).
	OldestPending time.Time `json:"oldest_pending,omitzero"`
}

// Inspector is implemented by stores an operator can look into: both
// stores of this module implement it.
type Inspector interface {
	// Status lists the destinations with pending or retired records.
	Status(ctx context.Context) ([]DestinationStatus, error)
	// Retired lists up to limit retired records, oldest first.
	Retired(ctx context.Context, limit int) ([]Record, error)
	// Revive puts retired records back: due now, with no attempts spent.
	// With no seqs, it revives every retired record. It reports how many
	// it revived.
	Revive(ctx context.Context, seqs ...int64) (int, error)
}

// Notifier wakes a relay when records are stored, so that it need not
// wait out its poll interval. Listen calls wake (which never blocks) for
// every notification until ctx is done, and returns ctx's error or the
// failure that stopped it; the relay calls Listen again after a failure.
// The memory store is one; package outbox/pgnotify provides one for
// PostgreSQL.
type Notifier interface {
	Listen(ctx context.Context, wake func()) error
}
