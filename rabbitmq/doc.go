// Package rabbitmq is the AceMQ driver for RabbitMQ (AMQP 0-9-1), built on
// github.com/rabbitmq/amqp091-go. Importing it for its side effects
// registers it for the "amqp" and "amqps" URL schemes:
//
//	import _ "github.com/acemq/acemq/rabbitmq"
//
// # Connections and channels
//
// A connection given several URLs (a cluster's nodes) dials them in
// rotation: a new connection starts at a random one, so that clients given
// the same list spread over the nodes; each attempt dials every URL once,
// those whose last dial failed last; after losing a node, the others are
// tried before it. With several URLs each dial is bounded by
// driver.Config.EndpointTimeout (DefaultEndpointTimeout, 5 s) when that is
// shorter than DialTimeout, so a dead or black-holed node costs seconds.
// The connection reports the URL it is on (driver.EndpointReporter, and
// Event.Endpoint on lost and recovered). It names itself to the
// broker with connection_name (the configured name, else "AceMQ for Go")
// and product "AceMQ for Go". It uses one channel per purpose: publishing
// channels in confirm mode, one channel per subscription, one for Get, and
// short-lived channels for declarations, passive checks and Ping, so that a
// channel error on one (a PRECONDITION_FAILED declaration, say) does not
// take the others down.
//
// # Publishing
//
// Publisher confirms are on unless driver.Config.NoConfirms is set; a
// mandatory publish is confirmed even then, because an unroutable message
// can only be reported by waiting for its confirm. Publishes are pipelined:
// many goroutines publish at once and each waits for its own confirm without
// holding a lock. At most driver.Config.MaxOutstanding (default 1000)
// publishes await a confirm; beyond that a publish waits for a permit for up
// to ConfirmTimeout (default 10 s). A sent publish waits for its confirm
// on the connection's confirm clock, which ticks every eighth of
// ConfirmTimeout for all the publishes waiting at once: a confirm that does
// not come fails the publish with driver.ErrConfirmTimeout between one and
// 1⅛ ConfirmTimeouts after it was sent (10 to 11.25 s by default). A
// message the broker returns (basic.return) is matched to its publish by
// message-id and destination and fails with a *driver.ReturnError; a return whose message-id matches no outstanding
// publish (for instance a message published without a message-id) is
// ignored and that publish succeeds when the broker confirms it.
//
// While the broker blocks the connection (a resource alarm) publishes fail
// at once with an error wrapping driver.ErrBlocked.
//
// # Recovery
//
// A connection lost other than by Close is re-established in the
// background with exponential backoff (1 s doubling to 30 s, with jitter,
// until Close). The exchanges, named queues and bindings declared through
// the connection are redeclared, and every live subscription resubscribes
// under the same Deliveries channel (or Receive calls). Transitions are
// reported to driver.Config.OnEvent. See docs/connecting.md in the
// repository for what recovery does and does not do.
//
// # Consuming
//
// Subscriptions implement driver.Receiver: Receive reads amqp091's delivery
// channel in the caller's goroutine, so the acemq consumer's workers take
// deliveries with no goroutine of the driver's in between. The first reader
// to find a subscription's channel gone resubscribes while the others wait.
// Deliveries, for callers that want a channel, starts one goroutine that
// pumps Receive into it.
//
// A Cancel whose context ends before the broker's basic.cancel-ok leaves
// the cancel waiting in the background; a Close of the subscription waits
// for it (up to 5 s, while the broker does not answer) before it closes the
// channel, since amqp091 cannot wait for a basic.cancel-ok and a
// channel.close-ok on one channel at once. When the broker has not
// answered by then, Close returns and the channel is closed once the
// answer comes, or by Conn.Close.
//
// While a subscription is busy (deliveries keep arriving), its acks are
// sent together: one basic.ack with multiple set covers a run of delivery
// tags that have all been settled, every one of them acked or already
// nacked or rejected on its own; a delivery not yet settled is never
// covered, and acks after it wait for it or go one by one. An ack waits at
// most 20 ms, or until a quarter of the prefetch has gathered (at most
// 256), and the acks go at once when the subscription has no further
// delivery to hand up, before a nack or reject on the channel, and at
// Cancel, Close and Conn.Close. A subscription that is not busy (a
// request/reply responder, say), one with a prefetch below 16, and
// deliveries fetched with Get send each ack at once. An ack still waiting
// when the channel or connection is lost is not sent and the broker
// redelivers its message, as it does for an ack in flight when a
// connection fails: Ack returned nil in both cases, so coalescing widens
// the window in which a settled message can come back from a round trip
// to at most those 20 ms (or that many acks). An Ack on a channel known to
// be gone fails at once, as without coalescing.
//
// # TLS
//
// amqps:// URLs verify the broker with the system roots unless
// driver.Config.TLS says otherwise; TLS 1.2 is the minimum, and a TLS
// configuration together with an amqp:// URL is refused. Certificates
// marked as development certificates (see package devcert) are refused
// unless the configuration comes from AllowDevelopmentCertificates.
package rabbitmq
