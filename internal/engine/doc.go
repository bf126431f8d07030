// Package engine holds what package acemq and the packages built on it
// (rpc, route, outbox, schedule, stream, actuator, acemqtest, queues)
// share and keep out of acemq's public API: a connection's one publish
// path with its telemetry, the envelope writers (EnvelopeWriter) through
// which rpc writes its requests' and replies' headers as acemq's
// publishers do, the consume engine (Loop), the state a consumer reports,
// and the reason a set-aside copy carries.
//
// The consume engine works on the driver's deliveries. A Loop's workers
// take them from the subscription and hand each, by value, to the
// dispatch function package acemq gave NewLoop (Hooks.Dispatch): it reads
// the envelope, runs the interceptors, decodes the body into the
// consumer's type, runs the middleware and the handler, and converts the
// handler's Ack into a Verdict. The Loop then settles the delivery as the
// verdict says — acknowledge, retry through the policy (Policy) on a rung
// or in the consumer, set aside to the dead-letter or parked queue, put
// back — and hands the settlement to Hooks.Emit. It also holds the
// consumer's flow control (Pause, Resume), its circuit breaker, ordered
// keys and its bounded drain (Close). Every consumer runs on it: Consume,
// ConsumeTypes and ConsumeBatch (each a different dispatch), rpc.Serve and
// package stream's readers (a Loop made with a Stream in its Config, which
// settles as a stream allows). The type parameter of a Loop is what
// package acemq carries of a delivery from its dispatch to its settlement
// (its envelope and the end of its process span); the engine never looks
// inside it, and keeping it a type parameter rather than an interface
// keeps it off the heap.
//
// Nothing is filled in from outside: what package acemq lends the engine
// (its telemetry, its envelope writers) it gives to NewConn. An
// *acemq.Conn embeds a Handle (an
// unexported field, so applications see nothing of it), and Of finds the
// *Conn behind it through a method only this package can name; an
// *acemq.Consumer does the same with a ConsumerHandle, and a codec option
// with a Carrier. A value that does not carry one gets nil.
package engine
