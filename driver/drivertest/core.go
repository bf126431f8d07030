// Package drivertest is the conformance suite every acemq driver must pass.
//
// A driver's tests call [RunConformance] with a function that opens a fresh
// connection to one broker. The suite names everything it declares with a
// random prefix and, when the driver can delete, deletes it when each test
// ends, so it can run against a shared RabbitMQ. It never asserts timing:
// it waits for what it expects with deadlines, and only waits a short while
// where it checks that something does not happen.
//
// # Core and optional parts
//
// The core tests need nothing but the methods of [driver.Conn]. They cover
// declaration rules (redeclaring, conflicting settings, reserved names,
// quorum-queue rules), routing through the direct, topic and fanout
// exchanges and the default exchange, NO_ROUTE returns, message properties
// and header types, publisher confirms under concurrency, nack with requeue
// and the redelivered flag, reject with requeue, a quorum queue's delivery
// limit counting requeued rejects, dead-lettering on reject and on TTL with
// x-death, the retry rung shape, per-message expiration (acted on at the head of
// the queue), priority queues, prefetch, exclusive
// and auto-delete queues, Cancel and Close semantics (a Close after a
// Cancel whose context ended returns, and closing the connection ends a
// Close in progress), closing the connection, round-robin between subscriptions, single active consumer
// and, on a broker that reports Capabilities.Streams, streams: offsets on
// every delivery, every start (first, last, next, an offset, a
// timestamp), non-destructive reads, the required prefetch and retention
// by size in whole segments.
//
// Where a core test checks what is on a queue it uses the optional
// interfaces when the connection has them and otherwise falls back on core
// methods: it fetches with [driver.Getter] or else through a subscription
// of its own on the queue; it asks [driver.Inspector] whether a queue still
// exists or else publishes a mandatory probe and watches for NO_ROUTE; it
// deletes with [driver.Deleter] at cleanup or else leaves the uniquely
// named topology behind. A check that needs a count (ready messages,
// consumers) is made only with an Inspector.
//
// Each optional interface has tests of its own, run when the driver
// implements it: [driver.Inspector] (passive checks, not-found errors,
// message and consumer counts), [driver.Deleter] (the message count of a
// deleted queue, deleting what is absent), [driver.Getter],
// [driver.BatchPublisher], [driver.EachPublisher], [driver.Pinger], [driver.BlockReporter],
// [driver.CapabilityReporter], [driver.Unbinder] and, on subscriptions,
// [driver.Receiver]. A driver that lacks one is not failed or skipped for
// it: the test logs that it did not run and passes.
//
// Capabilities come from a [driver.CapabilityReporter]; without one the
// suite assumes what package acemq needs of every broker, publisher
// confirms and dead-lettering, and no quorum queues. A test that needs a
// capability the driver reports it lacks logs that it did not run.
package drivertest

import (
	"reflect"
	"testing"

	"github.com/acemq/acemq/driver"
)

// RunConformance runs the conformance suite as subtests of t. open must
// return a fresh connection to the same broker on every call; the suite
// closes the connections it opens (closing one twice must be harmless).
// See the package documentation for what is checked.
func RunConformance(t *testing.T, open func(t *testing.T) driver.Conn) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(*env)
	}{
		// The core: driver.Conn alone.
		{"DeclareExchange", testDeclareExchange},
		{"DeclareQueue", testDeclareQueue},
		{"QuorumRules", testQuorumRules},
		{"DirectAndDefaultExchange", testDirectAndDefault},
		{"TopicExchange", testTopic},
		{"FanoutExchange", testFanout},
		{"NoRoute", testNoRoute},
		{"Properties", testProperties},
		{"Confirms", testConfirms},
		{"ConcurrentConfirms", testConcurrentConfirms},
		{"NackRequeueRedelivers", testNackRequeue},
		{"DeadLetterOnReject", testDeadLetterReject},
		{"RejectRequeueRedelivers", testRejectRequeue},
		{"DeliveryLimit", testDeliveryLimit},
		{"TTLDeadLetter", testTTLDeadLetter},
		{"RetryRung", testRetryRung},
		{"PerMessageExpiration", testPerMessageExpiration},
		{"ExpirationAtHead", testExpirationAtHead},
		{"PriorityOrder", testPriorityOrder},
		{"PriorityArguments", testPriorityArguments},
		{"Prefetch", testPrefetch},
		{"ExclusiveQueue", testExclusiveQueue},
		{"AutoDeleteQueue", testAutoDeleteQueue},
		{"Cancel", testCancel},
		{"ResubscribeAfterCancel", testResubscribe},
		{"CloseRequeues", testCloseRequeues},
		{"ConnCloseEndsSubscriptions", testConnClose},
		{"CloseAfterAbandonedCancel", testCloseAfterAbandonedCancel},
		{"RoundRobin", testRoundRobin},
		{"StreamOffsets", testStreamOffsets},
		{"StreamRetention", testStreamRetention},
		{"SingleActiveConsumer", testSingleActiveConsumer},

		// The optional interfaces, each run when the driver has it.
		{"Inspect", optional(testInspect)},
		{"Delete", optional(testDelete)},
		{"Get", optional(testGet)},
		{"PublishBatch", optional(testPublishBatch)},
		{"PublishEach", optional(testPublishEach)},
		{"Ping", optional(testPing)},
		{"Blocked", optional(testBlocked)},
		{"Capabilities", optional(testCapabilities)},
		{"Unbind", optional(testUnbind)},
		{"Endpoint", optional(testEndpoint)},
		{"Purge", optional(testPurge)},
		{"List", optional(testList)},
		{"Clock", optional(testClock)},
		{"Receive", testReceive}, // driver.Receiver is on the subscription
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(newEnv(t, open))
		})
	}
}

// optional wraps the test of an optional interface T: it runs fn with the
// admin connection as a T, or, when the driver does not implement T, logs
// that it did not run. It does not skip: a driver without an optional
// interface conforms.
func optional[T any](fn func(e *env, x T)) func(*env) {
	return func(e *env) {
		x, ok := e.admin.(T)
		if !ok {
			e.notRun(reflect.TypeFor[T]().String())
			return
		}
		fn(e, x)
	}
}

// notRun logs that a test of the optional interface iface (such as
// "driver.Inspector") did not run.
func (e *env) notRun(iface string) {
	e.t.Helper()
	e.t.Logf("not run: the driver does not implement %s", iface)
}

// as returns c as the optional interface T, which the suite has already
// found on the admin connection: every connection of one driver must
// implement the same optional interfaces.
func as[T any](e *env, c driver.Conn) T {
	e.t.Helper()
	x, ok := c.(T)
	if !ok {
		e.t.Fatalf("the admin connection implements %s but this %T does not", reflect.TypeFor[T](), c)
	}
	return x
}
