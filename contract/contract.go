// Package contract holds the names and limits of the AceMQ wire contract
// (docs/wire.md) that an operator, a tool or a test needs to find what the
// library declared and wrote: the exchanges it manages, the queues that
// make up a queue's dead-letter and retry halves, and the bound on the
// reason it writes in x-acemq-error.
//
// An application rarely needs it: Topology declares these queues and
// exchanges, and a consumer's settlement uses them. A dashboard that
// watches {q}.dlq, a test that reads what was parked, or a tool that moves
// messages out of a rung queue names them through this package, so that
// its names are the library's.
package contract

import (
	"time"

	"github.com/acemq/acemq/internal/wire"
)

// Names of the exchanges the library manages (docs/wire.md §5.1): the
// dead-letter exchange every queue's dead-letter half is bound to, and the
// exchange the retry rungs hand a message back through.
const (
	DeadLetterExchange = wire.DeadLetterExchange
	RetryExchange      = wire.RetryExchange
)

// MaxErrorHeaderBytes is the most the engine writes in x-acemq-error. A
// longer reason (an error that quotes a whole payload, say) is cut there
// and says how long it was; the Settlement keeps it whole. Headers travel
// in one AMQP frame (128 KiB by default on RabbitMQ): a copy whose reason
// did not fit could not be set aside at all, and its delivery would come
// back again and again.
const MaxErrorHeaderBytes = wire.MaxErrorHeaderBytes

// BlockedDetail starts the detail of a connection the broker has blocked
// (a HealthReport's Detail, a log line); the broker's reason follows it
// (docs/wire.md §11.3, fixed up to the colon).
const BlockedDetail = wire.BlockedDetail

// DeadLetterQueue is the name of q's dead-letter queue, {q}.dlq.
func DeadLetterQueue(q string) string { return wire.DeadLetterQueue(q) }

// ParkedQueue is the name of q's parking queue, {q}.parked.
func ParkedQueue(q string) string { return wire.ParkedQueue(q) }

// RungQueue is the name of q's retry rung for a wait of d,
// {q}.retry.{delay}, the delay written as the family writes it: 30s, 5m,
// 2h, 250ms.
func RungQueue(q string, d time.Duration) string { return wire.RungQueue(q, d) }
