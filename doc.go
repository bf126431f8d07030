/*
Package acemq sends and receives messages over AMQP 0-9-1 (RabbitMQ) the way
every AceMQ library does, so that a Go service exchanges messages, byte for
byte, with services written with the Java, Python, .NET and Ruby libraries
of the family. The wire contract they share is described in docs/wire.md;
this package is its Go API.

# A message's life

A connection comes first. [Connect] opens one to a broker by URL: memory://NAME
is an in-process broker, built in, for tests, examples and the demo;
amqp:// and amqps:// reach RabbitMQ once the driver is imported for its side
effects:

	import _ "github.com/acemq/acemq/rabbitmq"

	conn, err := acemq.Connect(ctx, "amqp://guest:guest@localhost:5672/")

A cluster is a comma-separated list of its nodes' URLs; the driver dials
them in rotation, each within [WithEndpointTimeout], and [Conn.Endpoint]
says which node the connection is on (docs/connecting.md, "Clusters").
[topology.WithInitialGroupSize] replicates a quorum queue on that many nodes.

A [Publisher] sends typed values. Its codec (JSON unless [WithCodec] says
otherwise) turns each value into a body; an [Envelope] — the message's id,
type, correlation, causation, attempt, first-seen time and origin — travels
beside it in reserved x-acemq-* headers. Every publish is persistent,
mandatory and confirmed by the broker unless an option says otherwise, so
Send returning nil means the broker has the message:

	orders := acemq.NewPublisher[Order](conn, "orders")
	env, err := orders.Send(ctx, "order.placed", Order{ID: "o-1"})

Many goroutines calling Send share the connection's pipelined confirms.
From one goroutine, [Publisher.SendAll] publishes a batch and waits for its
last confirm, and [Publisher.SendSeq] publishes a sequence (an [iter.Seq])
of any length with a sliding window of confirms, reporting each outcome in
order.

[Consume] starts a consumer of a queue. Each delivery is read into an
envelope, decoded into a value and handed to a [Handler] as a [Message]; the
handler's answer, an [Ack], decides what happens next: [Accept] acknowledges;
[Retry] tries again through the consumer's [retry.Policy], waiting in the
consumer or on a broker "rung" queue, and dead-letters the message to
{queue}.dlq when no attempt is left; [Reject] dead-letters at once; [Park]
sets it aside in {queue}.parked; [InProgress] puts it back unchanged for
later. [FromError] turns an error into a decision, and an error marked
[Fatal] is never retried. Nothing is dropped: what cannot be set aside is
put back on its queue.

	consumer, err := acemq.Consume(ctx, conn, "orders.new",
		func(ctx context.Context, m acemq.Message[Order]) acemq.Ack {
			return acemq.FromError(ship(ctx, m.Payload))
		},
		acemq.WithRetry(retry.Exponential(5, time.Second, time.Minute)),
		acemq.WithConcurrency(4))

Two variants run on the same engine. [ConsumeTypes] is one consumer for a
queue that carries several message types: each delivery goes to the handler
registered for its envelope type with [HandleType], decoded into that
handler's type, and a type nobody registered is dead-lettered (or handed to
[WithUnknownType]). [ConsumeBatch] hands its handler up to N messages, or
what arrived within a window, for work that is cheaper in bulk, and settles
each message by the Ack the handler returns for it.

Every settled delivery is reported once, as a [Settlement], to the
connection's metrics and spans (through the OpenTelemetry API: a program
without an SDK pays next to nothing) and to the functions given to
[Conn.OnSettle]. [Consumer.Close] and [Conn.Close] drain within bounds:
handlers that are running finish, deliveries not started go back.

# Topology

A [topology.Topology] (package topology) is the application's exchanges,
queues and bindings written in code: built with [topology.New] and its
chained methods, validated, printed as a [topology.Plan], declared on a
connection with [topology.Topology.Apply], compared with the broker with
[topology.Topology.Drift] and removed with [topology.Topology.Delete]. It
decides the queue type (durable queues are quorum queues) and declares the
dead-letter and retry halves ([topology.WithDeadLettering], [WithRetry]) as
the family names them. A consumer declares its own dead-letter half when it
starts, never its queue: declare that with a topology, or pass one with
[WithTopology].

# Streams and ordering

A stream (topology.WithQueueType(topology.QueueStream), with WithMaxAge,
WithMaxLengthBytes and WithMaxSegmentSizeBytes) is an append-only log read from an offset by
package stream, which resumes after a reconnect with no gap and keeps
checkpoints (docs/streams.md). Package partition routes by key over N
queues, each read by one consumer at a time
(topology.WithSingleActiveConsumer);
[WithOrderKey] keeps per-key order while several handlers run
(docs/ordering.md).

# Looking at queues

Package queues looks at a queue from outside: queues.Inspect reports its
depth and consumers, and queues.Browse opens a Browser, which reads a
queue's messages without a consumer and holds them until it takes them,
moves them elsewhere, or puts them back: how an operator looks at a
dead-letter queue. [Conn.Health] reports the connection's health
as the family's actuator endpoint does.

# The pipeline

Publish interceptors ([WithPublishInterceptors]) see and may change every
application publish; consume interceptors ([WithConsumeInterceptors]) see
every delivery before it is decoded and may refuse it; [Middleware] wraps a
typed handler ([WithMiddleware]; package middleware has a timeout, a rate
limit and per-message logs). [WithLogger] logs operator-level events
through log/slog. [Consumer.Pause], [Publisher.Pause] and a circuit breaker
([WithBreaker]) stop the flow without closing anything; [Conn.Close] drains
every consumer at once within one deadline. See docs/pipeline.md.

# Options

Every option of the module is a function named With… that returns an
option interface: [ConnOption] for Connect, [PublisherOption], [SendOption],
[ConsumeOption]; [topology.Option] for the topology builder.
An option that switches a default off takes a bool: WithConfirms(false),
WithMandatory(false), topology.WithDurable(false). [WithCodec] is taken by both
publishers and consumers, [WithRetry] by both consumers and queue
declarations, and the [InterceptorOption] values of
[WithPublishInterceptors] and [WithConsumeInterceptors] by Connect,
NewPublisher and Consume. A callback option is named WithOn…
([WithOnConnEvent]). A builder method of a value is not an option and is
not named With… ([retry.Policy.Jitter], [retry.Policy.GiveUpAfter]).

An option only records its value. The call that takes it checks it, and
only that call: Connect, NewPublisher (whose mistakes every Send returns,
since building a publisher cannot fail), Send, Consume, and the topology
builder (reported by [topology.Topology.Validate], Plan and Apply). Nonsensical
values (a concurrency of 0, a retry policy with no attempts, a negative
timeout, a nil interceptor) are refused there with an error that names the
option and says what to change.

# Errors

Every package of the module writes its errors one way, as the standard
library does. A message is a lower-case fragment with no final period, so
that it reads well inside another. Each package begins the errors it
returns with its own name, once — acemq:, rabbitmq:, rpc:, stream: — and
keeps the text of an error it wraps as it is, so that a chain names each
package it went through once, outermost first:

	acemq: publishing to exchange "" with routing key "orders": rabbitmq: nothing was published: the message cannot be sent over AMQP 0-9-1: …

A sentinel the package returns as it is begins with its name like any
other error (rpc.ErrTimeout reads "rpc: no reply arrived"). One that an
implementation returns to the package that asked it — the sentinels the
drivers share ([ErrClosed], [ErrNotFound], [ErrLost], [ErrBlocked] and the
rest of package driver's), those of a Store, a Log or a key Provider
(saga.ErrExists, inbox.ErrClaimLost, avro.ErrConflict,
encrypted.ErrUnknownKey) — is a fragment, met wrapped in the words of the
package that asked; so are a few of this package's and its siblings' ([ErrPaused], queues.ErrNotTaken,
[ErrTooLarge], [ErrTooDeep]) and the error types that carry
what a caller inspects ([DecodeError], [LimitError], [HeaderValueError],
[PanicError]), which [NewEnvelope] and the codecs return as they are.
Wherever a doc comment says an error wraps a sentinel,
errors.Is finds it; test for an error with errors.Is and errors.As, never
by its text. Three texts are the family's, fixed by the wire contract
rather than by this rule: a [BatchError] reads "N of M messages were not
confirmed; K were. The first failure was: …" with no prefix, a publish that
waited out its permit "N publishes are already waiting for a confirm and
none completed within …", and a [ReservedHeaderError] uses Python's wording
(docs/wire.md §2.5, §11.1, §11.4). The acemq command prints an error after its own name, once: an error of this
package begins with it already.

# Where to go next

  - docs/ in the repository: the envelope, consuming, the pipeline,
    retries, topology, connecting, observability, reliability and
    performance, expiry and priority (docs/expiry-and-priority.md),
    scheduling (docs/scheduling.md), the operator console
    (docs/console.md), and docs/wire.md for the contract itself;
    docs/upgrading.md for names that changed; docs/inbox.md,
    docs/outbox.md and docs/sagas.md for exactly-once effects (packages
    inbox, outbox, saga and sqlstore).
  - package schedule: delivering a message later, keeping its id.
  - packages under codec/: XML, YAML, TOML, Protobuf and Avro codecs,
    encryption (codec/encrypted) and codecs by name (codec); see
    docs/codecs.md and docs/encryption.md.
  - package rpc: request and reply on top of one-way messaging.
  - packages route and replay: routing slips and pipelines; moving dead
    letters back.
  - package claimcheck: large payloads kept out of the broker.
  - package middleware: handler middleware (timeout, rate limit, logs).
  - package acemqtest: a memory:// broker per test, waiting until a consumer
    is idle, collected settlements, a clock the test advances.
  - package actuator: the family's /acemq-metrics, /acemq-health and
    /acemq-info endpoints.
  - package driver: the interface a broker implements; memory and rabbitmq
    are its two drivers.
  - examples/ in the repository: runnable programs, each run by the tests.
*/
package acemq
