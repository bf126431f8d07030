// Package reliability holds the fault-injection scenarios that prove, against
// the in-process broker and a real RabbitMQ, that acemq never loses a
// message quietly: connections killed under load, the broker restarted, a
// resource alarm, a consumer process killed in its handler, retries that
// outlive the consumer that scheduled them, and hostile headers.
//
// The package has no API: everything is in its tests. Each scenario logs one
// line that starts with RESULT and carries its figures as key=value pairs;
// docs/reliability.md quotes them and says how to run each scenario.
//
// Scenarios that hurt the broker for everyone are named TestFault… and run
// only with ACEMQ_TEST_FAULTS=1, alone (-p 1); the others run with the
// ordinary broker tests. ACEMQ_RELIABILITY_FULL=1 makes the load scenarios
// send 20,000 messages instead of a few thousand.
package reliability
