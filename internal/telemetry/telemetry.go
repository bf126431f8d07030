// Package telemetry holds the names and layouts of the family's telemetry
// that several packages of the module share: the instrumentation scope,
// the metric names and the histogram buckets (docs/wire.md §10). Package
// acemq records the consume and publish families, rpc the request family,
// route the pipeline family, and actuator renders them all.
package telemetry

// Scope is the OpenTelemetry instrumentation scope of the family's metrics
// and spans.
const Scope = "org.acemq.amqp"

// The metric names (docs/wire.md §10.1). ConnectionEvents is this library's
// addition.
const (
	PublishTotal     = "acemq.publish.total"
	PublishDuration  = "acemq.publish.duration"
	ConsumeTotal     = "acemq.consume.total"
	ConsumeDuration  = "acemq.consume.duration"
	ConsumeAttempts  = "acemq.consume.attempts"
	ConsumeInFlight  = "acemq.consume.in.flight"
	Retried          = "acemq.messages.retried.total"
	DeadLettered     = "acemq.messages.dead.lettered.total"
	SetAsideFailed   = "acemq.messages.set.aside.failed"
	RungMissing      = "acemq.retry.rung.missing"
	ConnectionEvents = "acemq.connection.events"
	// BreakerState and BreakerOpened are this library's additions
	// (docs/pipeline.md): a consumer's circuit breaker state (0 closed, 1
	// half open, 2 open) and how often it opened.
	BreakerState    = "acemq.consume.breaker.state"
	BreakerOpened   = "acemq.consume.breaker.opened"
	RequestTotal    = "acemq.request.total"
	RequestDuration = "acemq.request.duration"
	RunTotal        = "acemq.pipeline.run.total"
	RunDuration     = "acemq.pipeline.run.duration"
	OutboxTotal     = "acemq.outbox.total"
	OutboxLag       = "acemq.outbox.lag"
	// OutboxRetired is this library's addition: records the relay gave
	// up on.
	OutboxRetired = "acemq.outbox.retired"
	// SagaTotal and SagaCompensationFailed are this library's additions:
	// sagas ended, by state, and compensations that failed.
	SagaTotal              = "acemq.saga.total"
	SagaCompensationFailed = "acemq.saga.compensation.failed"
)

// The scheduler's metrics (package schedule). The contract names none;
// these are this library's, in the family's style.
const (
	// ScheduleScheduled counts messages handed to the scheduler
	// (exchange, routing.key).
	ScheduleScheduled = "acemq.schedule.scheduled.total"
	// ScheduleHops counts publishes onto a rung (rung).
	ScheduleHops = "acemq.schedule.hops.total"
	// ScheduleDelivered counts messages published to their target
	// (exchange, routing.key).
	ScheduleDelivered = "acemq.schedule.delivered.total"
	// ScheduleLateness is how long after its due time a message was
	// delivered, in seconds (exchange, routing.key); early is 0.
	ScheduleLateness = "acemq.schedule.lateness"
	// ScheduleUndeliverable counts due messages that could not be
	// delivered (reason: unroutable or no_exchange, held back a while;
	// malformed, dropped).
	ScheduleUndeliverable = "acemq.schedule.undeliverable.total"
)

// DurationBuckets are the bucket boundaries, in seconds, of every family
// duration histogram: 5 ms to 60 s.
func DurationBuckets() []float64 {
	return []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60}
}

// AttemptBuckets are the bucket boundaries of acemq.consume.attempts: 1 to
// 10.
func AttemptBuckets() []float64 { return []float64{1, 2, 3, 4, 5, 6, 7, 8, 9, 10} }
