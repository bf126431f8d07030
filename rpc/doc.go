// Package rpc draws request and reply on top of one-way messaging: a
// [Requester] publishes a request naming a queue to answer on and waits; a
// responder started with [Serve] handles the request and publishes the
// answer there; the two are paired by a correlation identifier.
//
// Read docs/request-reply.md before using it. If both sides can speak HTTP
// or gRPC, they should: those have timeouts, retries, load balancing and
// health checks that a messaging library will not match. This package is for
// a responder reachable only on the broker, for one worker among many where
// the broker already balances the load, and for a request that should queue
// rather than fail while the responder redeploys.
//
// # The two halves
//
// [Open] builds a Requester: it declares one reply queue (acemq-reply-<uuid>,
// transient, exclusive, auto-deleting, classic) and starts one consumer on it
// that declares nothing, and returns only once both exist. [Requester.Ask] is
// safe for many goroutines; every call has a deadline (30 s by default).
//
// [Serve] starts a consumer whose handler returns an answer or an error and
// returns a [Responder]: the consumer plus the answered and unanswerable
// counters.
// [ServeTypes] is one responder for several request types, one handler per
// envelope type registered with [HandleType]. A reply is published even
// when the handler's context has ended (the caller is waiting for it),
// bounded by 30 to 31 s: the replies sent in one second share one
// deadline, 30 s after the end of that second, rather than each starting
// a timer of its own. [Responder.Close] ends that deadline once its drain
// is over, abandoning a reply still being published then.
//
// # Failures a caller can tell apart
//
//   - the responder failed: a *[ResponderError] carrying the responder's
//     "TypeName: message", at once;
//   - the responder refused the request with [Refuse] (an expected answer):
//     the same *[ResponderError] with Refused set, which errors.Is matches
//     against [ErrRefused] (the reply's acemq-error-kind header; a reply
//     from a sibling library never has it, and reads as a failure);
//   - no reply in time: a *[TimeoutError], which errors.Is matches against
//     both [ErrTimeout] and context.DeadlineExceeded;
//   - a reply the codec cannot read: the codec's own error (an
//     *acemq.DecodeError for the built-in codecs), at once;
//   - the request could not be published: the publish error (for example an
//     *driver.ReturnError when nothing is bound for the routing key).
//
// A timeout says no answer arrived. It does not say nothing happened: the
// request may still be queued, still being handled, or done with the reply
// lost on the way back. Whether to retry is a question of the responder's
// idempotency.
//
// # The wire
//
// The package follows docs/wire.md §8 exactly, so requesters and responders of
// every sibling library, and plain AMQP RPC clients and servers that only use
// the reply-to and correlation-id properties, interoperate with it. A request
// carries the reply address twice (the acemq-reply-to header and the AMQP
// reply-to property) and its id, correlation and AMQP correlation-id are one
// fresh UUID per call.
package rpc
