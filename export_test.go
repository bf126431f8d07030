package acemq

// Names the external tests of package acemq use but the package does not
// export: the wire's header names, the engine's retry arithmetic and the
// consumer's declarations, so that tests check them against the contract.

import (
	"time"

	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

const (
	HeaderID            = wire.HeaderID
	HeaderType          = wire.HeaderType
	HeaderVersion       = wire.HeaderVersion
	HeaderCorrelation   = wire.HeaderCorrelation
	HeaderCausation     = wire.HeaderCausation
	HeaderAttempt       = wire.HeaderAttempt
	HeaderFirstSeen     = wire.HeaderFirstSeen
	HeaderOrigin        = wire.HeaderOrigin
	HeaderError         = wire.HeaderError
	HeaderClaim         = wire.HeaderClaim
	HeaderRoute         = wire.HeaderRoute
	HeaderRoutePosition = wire.HeaderRoutePosition
	HeaderRouteID       = wire.HeaderRouteID

	HeaderReplyTo      = wire.HeaderReplyTo
	HeaderReplyError   = wire.HeaderReplyError
	HeaderRoutingSlip  = wire.HeaderRoutingSlip
	HeaderReplayedFrom = wire.HeaderReplayedFrom
	HeaderReplayedAt   = wire.HeaderReplayedAt
	HeaderReplayCount  = wire.HeaderReplayCount

	DefaultType = wire.DefaultType

	InstrumentationScope   = telemetry.Scope
	MetricPublishTotal     = telemetry.PublishTotal
	MetricPublishDuration  = telemetry.PublishDuration
	MetricConsumeTotal     = telemetry.ConsumeTotal
	MetricConsumeDuration  = telemetry.ConsumeDuration
	MetricConsumeAttempts  = telemetry.ConsumeAttempts
	MetricConsumeInFlight  = telemetry.ConsumeInFlight
	MetricRetried          = telemetry.Retried
	MetricDeadLettered     = telemetry.DeadLettered
	MetricSetAsideFailed   = telemetry.SetAsideFailed
	MetricRungMissing      = telemetry.RungMissing
	MetricConnectionEvents = telemetry.ConnectionEvents
)

var (
	IsReserved      = wire.IsReserved
	TypeName        = wire.TypeName
	DefaultOrigin   = wire.DefaultOrigin
	DurationBuckets = telemetry.DurationBuckets
	AttemptBuckets  = telemetry.AttemptBuckets
	FormatDelay     = wire.FormatDelay
)

// ConsumerDeclarations lists what starting a consumer of queue with policy
// p declares, in order, without declaring it.
func ConsumerDeclarations(queue string, p retry.Policy) []topology.Declaration {
	return consumerDeclarations(queue, p)
}

// Plan is the plan the consume engine runs for p.
func Plan(p retry.Policy) engine.Policy { return engine.PolicyOf(p) }

// WireType is the x-acemq-type the envelope's headers carry for routingKey.
func (e Envelope) WireType(routingKey string) string { return e.wireType(routingKey) }

// Test-only access to what the package keeps unexported. The driver
// connection and the publish path are reached through
// internal/brokertest, as every package's tests do.

// Policy is the consumer's retry policy.
func (c *Consumer) Policy() retry.Policy { return c.core.cfg.retry }

// Exchange is the exchange the publisher sends to.
func (p *Publisher[T]) Exchange() string { return p.exchange }

// FirstSeenKnown reports whether the first-seen time came with the message.
func (e Envelope) FirstSeenKnown() bool { return !e.ageUnknown }

// Next is the envelope of the next attempt.
func (e Envelope) Next() Envelope { return e.next() }

// UnknownReserved returns a copy of the x-acemq-* headers the envelope was
// read with that this version does not know.
func (e Envelope) UnknownReserved() map[string]any { return copyHeaders(e.reserved) }

// copyHeaders returns a deep copy of h (nil when h is empty).
func copyHeaders(h map[string]any) map[string]any {
	if len(h) == 0 {
		return nil
	}
	out := make(map[string]any, len(h))
	for k, v := range h {
		out[k] = cloneValue(v)
	}
	return out
}

// SetWaitBackoff shortens WithWaitForBroker's backoff for a test and
// returns a function that restores it.
func SetWaitBackoff(base, cap time.Duration) (restore func()) {
	b, c := waitBackoffBase, waitBackoffCap
	waitBackoffBase, waitBackoffCap = base, cap
	return func() { waitBackoffBase, waitBackoffCap = b, c }
}

// WaitBackoff is the wait before retry n of WithWaitForBroker.
func WaitBackoff(n int) time.Duration { return waitBackoff(n) }
