package wire

import (
	"fmt"
	"time"
)

// Names of the exchanges the library manages (docs/wire.md §5.1).
const (
	DeadLetterExchange = "acemq.dlx"
	RetryExchange      = "acemq.retry"
)

// MaxErrorHeaderBytes is the most the engine writes in x-acemq-error
// (package contract documents it).
const MaxErrorHeaderBytes = 4096

// BlockedDetail starts the detail of a connection the broker has blocked
// (docs/wire.md §11.3).
const BlockedDetail = "the broker has blocked this connection; publishing is paused: "

// DeadLetterQueue is the name of q's dead-letter queue, {q}.dlq.
func DeadLetterQueue(q string) string { return q + ".dlq" }

// ParkedQueue is the name of q's parking queue, {q}.parked.
func ParkedQueue(q string) string { return q + ".parked" }

// RungQueue is the name of q's retry rung for a wait of d,
// {q}.retry.{delay}.
func RungQueue(q string, d time.Duration) string { return q + ".retry." + FormatDelay(d) }

// FormatDelay renders a delay as the family names rungs (docs/wire.md
// §5.2): Nh for whole hours, else Nm for whole minutes, else Ns for whole
// seconds, else Nms.
func FormatDelay(d time.Duration) string {
	ms := d.Milliseconds()
	switch {
	case ms != 0 && ms%3_600_000 == 0:
		return fmt.Sprintf("%dh", ms/3_600_000)
	case ms != 0 && ms%60_000 == 0:
		return fmt.Sprintf("%dm", ms/60_000)
	case ms != 0 && ms%1000 == 0:
		return fmt.Sprintf("%ds", ms/1000)
	}
	return fmt.Sprintf("%dms", ms)
}
