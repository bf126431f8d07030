// Package engine holds what package acemq and the packages built on it
// (rpc, route, outbox, schedule, stream, actuator, acemqtest, queues)
// share and keep out of acemq's public API: a connection's one publish
// path with its telemetry, the state a consumer reports, and the reason a
// set-aside copy carries.
//
// Nothing is filled in from outside. An *acemq.Conn embeds a Handle (an
// unexported field, so applications see nothing of it), and Of finds the
// *Conn behind it through a method only this package can name; an
// *acemq.Consumer does the same with a ConsumerHandle, and a codec option
// with a Carrier. A value that does not carry one gets nil.
package engine
