package wire

import "strings"

// The reserved envelope headers (docs/wire.md §3.1). Applications never set
// them: the envelope writes and reads them.
const (
	HeaderID            = "x-acemq-id"
	HeaderType          = "x-acemq-type"
	HeaderVersion       = "x-acemq-version"
	HeaderCorrelation   = "x-acemq-correlation"
	HeaderCausation     = "x-acemq-causation"
	HeaderAttempt       = "x-acemq-attempt"
	HeaderFirstSeen     = "x-acemq-first-seen"
	HeaderOrigin        = "x-acemq-origin"
	HeaderError         = "x-acemq-error"
	HeaderClaim         = "x-acemq-claim"
	HeaderRoute         = "x-acemq-route"
	HeaderRoutePosition = "x-acemq-route-position"
	HeaderRouteID       = "x-acemq-route-id"
)

// The shared, unprefixed headers (docs/wire.md §3.2). Handlers see them as
// application headers and every republish carries them. The packages that
// write them (rpc, route, replay) export the names their users need.
const (
	HeaderReplyTo    = "acemq-reply-to"
	HeaderReplyError = "acemq-error"
	// HeaderReplyErrorKind is the Go library's addition beside
	// acemq-error: "refused" on the failure reply to a request the
	// handler refused (rpc.Refuse). Siblings ignore it.
	HeaderReplyErrorKind = "acemq-error-kind"
	HeaderRoutingSlip    = "acemq-routing-slip"
	HeaderReplayedFrom   = "acemq-replayed-from"
	HeaderReplayedAt     = "acemq-replayed-at"
	HeaderReplayCount    = "acemq-replay-count"
)

// The scheduler's headers (docs/wire.md §3.2, §5.7), unprefixed so that
// handlers see them, on messages between the scheduler's rungs.
// HeaderScheduleType is the Go library's addition: the scheduled message's
// own type, written only when it was set, since x-acemq-type says
// ScheduledMessage between rungs.
const (
	HeaderScheduleExchange    = "x-schedule-exchange"
	HeaderScheduleRoutingKey  = "x-schedule-routing-key"
	HeaderScheduleDueAt       = "x-schedule-due-at"
	HeaderScheduleContentType = "x-schedule-content-type"
	HeaderScheduleType        = "x-schedule-type"
)

// DefaultType is the x-acemq-type written when neither the envelope nor
// the routing key gives one.
const DefaultType = "message"

// ReservedPrefix begins every reserved header name, in any letter case.
const ReservedPrefix = "x-acemq-"

// IsReserved reports whether name belongs to the reserved namespace: any
// name beginning "x-acemq-", in any letter case.
func IsReserved(name string) bool {
	const p = ReservedPrefix
	if len(name) < len(p) || name[0]|0x20 != 'x' {
		return false // the common case for an application header: cheap
	}
	return name[:len(p)] == p || strings.EqualFold(name[:len(p)], p)
}
