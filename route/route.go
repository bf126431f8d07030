// Package route sends a message along a route of steps: each step's handler
// does its work and the library forwards the result to the next step, until
// the last step ends the run.
//
// Two wire forms carry a route, and every consumer here reads both
// (docs/wire.md §9):
//
//   - a declared route, for a Pipeline: the step names in x-acemq-route,
//     the position of the step the message is for in
//     x-acemq-route-position, and the run's id in x-acemq-route-id. The
//     exchange is the pipeline's name and each step's routing key is its
//     name.
//   - a JSON routing slip in the acemq-routing-slip header (Slip): each stop
//     names its own exchange and routing key, and the slip, not any
//     pipeline, decides where the message goes next.
//
// When a message carries both, the JSON slip wins. A step writes back the
// form the message arrived in.
//
// Every hop is a new message (docs/wire.md §9.4): a new id, the correlation
// carried, the causation set to the incoming id, attempt 1, and the
// first-seen time carried, so the envelope's age is the age of the whole
// run. Hops are published confirmed and mandatory through the connection;
// the incoming message is acknowledged only after the hop is confirmed.
package route

import (
	"github.com/acemq/acemq/internal/wire"
)

// HeaderRoutingSlip is the header a JSON routing slip travels in
// (docs/wire.md §3.3).
const HeaderRoutingSlip = wire.HeaderRoutingSlip

// Outcome is how a run ended, as acemq.pipeline.run.total names it
// (docs/wire.md §10.3).
type Outcome string

// The run outcomes.
const (
	// OutcomeCompleted: the run's last step finished.
	OutcomeCompleted Outcome = "completed"
	// OutcomeEndedEarly: a step before the last produced nothing.
	OutcomeEndedEarly Outcome = "ended_early"
)
