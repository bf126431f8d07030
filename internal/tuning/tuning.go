// Package tuning holds the engine's fixed waits that the root and the
// packages built on it share: values no option sets, kept in one place so
// that every settlement path waits as long.
package tuning

import "time"

// SettlementDeadline bounds one settlement (an ack, a set-aside's publish
// and ack) once the handler has returned, whatever the consumer's context.
const SettlementDeadline = 30 * time.Second

// InProgressDelay is the wait acemq.InProgress uses when given none.
const InProgressDelay = 5 * time.Second
