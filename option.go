package acemq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"log/slog"
	"strings"
	"time"

	"github.com/acemq/acemq/credentials"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/declare"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/field"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/trace"
)

// Every option of the package is a function named With… that returns a
// value of one of the option interfaces below. An option that switches a
// default off takes a bool: WithConfirms(false), WithMandatory(false).
// Options are applied in order: a later one of the same kind wins, except
// WithOnConnEvent, WithFallbackURLs, WithTopology, WithPublishInterceptors,
// WithConsumeInterceptors and WithMiddleware, which add up.
//
// An option only records its value; it never checks it. Each call that
// takes options checks them all in one place, the validate method of its
// configuration below, and reports the first mistake with an error naming
// the option: Connect (ConnOption), NewPublisher (PublisherOption; a
// publisher cannot fail to build, so each Send returns the error), Send
// (SendOption) and Consume (ConsumeOption). Package topology's builder
// does the same with its options (topology.Option).

// A ConnOption configures Connect.
type ConnOption interface{ applyConn(*connConfig) }

// A PublisherOption configures NewPublisher.
type PublisherOption interface{ applyPublisher(*publisherConfig) }

// A SendOption configures one Publisher.Send.
type SendOption interface{ applySend(*sendConfig) }

// A ConsumeOption configures Consume.
type ConsumeOption interface{ applyConsume(*consumeConfig) }

// A CodecOption chooses a codec; NewPublisher and Consume both take it.
type CodecOption interface {
	PublisherOption
	ConsumeOption
}

// A RetryOption carries a retry policy; Consume and topology.Topology.Queue
// both take it.
type RetryOption interface {
	ConsumeOption
	topology.Option
}

// Connect's options.

type connConfig struct {
	drv      driver.Config
	origin   string
	onEvent  []func(driver.Event)
	tel      telemetryConfig
	fallback []string
	wait     bool

	// What validate checks: the values given, before defaults apply.
	maxOutstanding                               *int
	confirmTimeout, dialTimeout, endpointTimeout *time.Duration
	credentials                                  *credentials.Provider

	// The pipeline (pipeline.go, logging.go).
	publishIcpt []PublishInterceptor
	consumeIcpt []ConsumeInterceptor
	logger      *slog.Logger
}

type connOption func(*connConfig)

func (f connOption) applyConn(c *connConfig) { f(c) }

// validate checks Connect's options: every mistake, joined.
func (c *connConfig) validate() error {
	var errs []error
	fail := func(format string, args ...any) { errs = append(errs, fmt.Errorf("acemq: "+format, args...)) }
	for _, u := range c.fallback {
		if strings.TrimSpace(u) == "" {
			fail("WithFallbackURLs was given an empty URL: pass the other nodes' URLs, for example amqp://guest:guest@node2:5672/")
			continue
		}
		if _, err := driver.ParseURL(u); err != nil {
			fail("WithFallbackURLs: a URL cannot be parsed: %v; write it as amqp://user:pass@host:port/vhost", err)
		}
	}
	if c.credentials != nil && *c.credentials == nil {
		fail("WithCredentials was given a nil provider: pass credentials.FromEnv, credentials.FromFile or a function")
	}
	if n := c.maxOutstanding; n != nil && *n < 1 {
		fail("WithMaxOutstanding(%d): at least one publish must be allowed to await its confirm; the default is 1000", *n)
	}
	for _, t := range []struct {
		d      *time.Duration
		option string
		def    string
	}{{c.confirmTimeout, "WithConfirmTimeout", "10s"}, {c.dialTimeout, "WithDialTimeout", "30s"}, {c.endpointTimeout, "WithEndpointTimeout", "5s"}} {
		if t.d != nil && *t.d <= 0 {
			fail("%s(%s): the timeout must be positive; the default is %s", t.option, *t.d, t.def)
		}
	}
	if nilPublish(c.publishIcpt) {
		fail("WithPublishInterceptors was given a nil interceptor: drop it")
	}
	if nilConsume(c.consumeIcpt) {
		fail("WithConsumeInterceptors was given a nil interceptor: drop it")
	}
	return errors.Join(errs...)
}

// WithName names the connection; the broker shows the name in its
// management UI.
func WithName(name string) ConnOption { return connOption(func(c *connConfig) { c.drv.Name = name }) }

// WithOrigin sets the origin stamped on messages published without one
// (convention service@host). Default: acemq@{hostname}.
func WithOrigin(origin string) ConnOption {
	return connOption(func(c *connConfig) { c.origin = origin })
}

// WithFallbackURLs adds URLs (a cluster's other nodes) to the URL given to
// Connect, dialled on connecting and on every reconnection (the RabbitMQ
// driver rotates through them: docs/connecting.md). Each must have the
// first URL's scheme. A comma-separated list in Connect's URL is the same.
func WithFallbackURLs(urls ...string) ConnOption {
	return connOption(func(c *connConfig) { c.fallback = append(c.fallback, urls...) })
}

// WithTLS sets the TLS configuration for amqps:// URLs. Nil verifies the
// broker with the system roots. Combined with an amqp:// URL it is refused.
func WithTLS(cfg *tls.Config) ConnOption { return connOption(func(c *connConfig) { c.drv.TLS = cfg }) }

// WithCredentials sets a credentials provider, consulted on every
// connection and reconnection; it overrides the user and password in the
// URL. Package credentials has providers reading the environment
// (credentials.FromEnv) and a file (credentials.FromFile).
func WithCredentials(p credentials.Provider) ConnOption {
	return connOption(func(c *connConfig) {
		c.credentials = &p
		c.drv.Credentials = func(ctx context.Context) (driver.Credentials, error) { return p(ctx) }
	})
}

// WithConfirms(false) switches publisher confirms off for application
// publishes: Send returns once the message is written, without waiting for
// the broker. Publishes the library makes itself (retries, dead letters,
// pipeline hops, replays) are always confirmed. The default is on.
func WithConfirms(on bool) ConnOption {
	return connOption(func(c *connConfig) { c.drv.NoConfirms = !on })
}

// WithMaxOutstanding bounds the publishes awaiting a confirm (default
// 1000); at the bound, publishers wait for a permit. n must be at least 1.
func WithMaxOutstanding(n int) ConnOption {
	return connOption(func(c *connConfig) { c.maxOutstanding, c.drv.MaxOutstanding = &n, n })
}

// WithConfirmTimeout bounds the wait for a permit to publish and for a
// confirm (default 10 s); on RabbitMQ the wait for a confirm ends between
// d and 1⅛ d. d must be positive.
func WithConfirmTimeout(d time.Duration) ConnOption {
	return connOption(func(c *connConfig) { c.confirmTimeout, c.drv.ConfirmTimeout = &d, d })
}

// WithDialTimeout bounds one connection attempt to one URL (default 30 s);
// with several URLs, WithEndpointTimeout bounds each when it is shorter.
// d must be positive.
func WithDialTimeout(d time.Duration) ConnOption {
	return connOption(func(c *connConfig) { c.dialTimeout, c.drv.DialTimeout = &d, d })
}

// WithEndpointTimeout bounds the dial of each node when the connection has
// more than one URL (default 5 s), so that a dead or unreachable node costs
// that long before the next is tried; WithDialTimeout still bounds each
// dial when it is shorter. With a single URL it has no effect: there is no
// other node to move on to. d must be positive.
func WithEndpointTimeout(d time.Duration) ConnOption {
	return connOption(func(c *connConfig) { c.endpointTimeout, c.drv.EndpointTimeout = &d, d })
}

// WithWaitForBroker makes Connect keep dialling, with backoff, until the
// broker answers or ctx ends, instead of failing at the first attempt: for
// a service that may start before its broker. Each failed attempt is
// reported to the WithOnConnEvent functions as a retrying event (Attempt,
// Delay, Err) and logged through WithLogger's logger; a connection made
// after one or more retries is reported as recovered. The waits start at
// about 1 s and double up to 30 s, each with ±20 % jitter; every attempt
// dials every URL once, as the first does. An error no retry can fix —
// credentials or a virtual host the broker refuses, a certificate that
// does not verify, a URL the driver cannot use (errors.Is(err,
// driver.ErrPermanent)) — ends the wait at once. When ctx ends first,
// Connect's error wraps ctx.Err() and the last attempt's error. Bound the
// wait with ctx (context.WithTimeout): without a deadline Connect waits as
// long as the broker stays away. Without this option Connect fails at the
// first attempt that fails.
func WithWaitForBroker() ConnOption {
	return connOption(func(c *connConfig) { c.wait = true })
}

// WithOnConnEvent registers a function called for every connection state
// transition (lost, retrying, recovered, blocked, unblocked). It runs on
// the driver's goroutine and must not block.
func WithOnConnEvent(f func(driver.Event)) ConnOption {
	return connOption(func(c *connConfig) {
		if f != nil {
			c.onEvent = append(c.onEvent, f)
		}
	})
}

// WithMeterProvider records the family's metrics through mp. Without it
// the global provider (otel.GetMeterProvider) is used, which records
// nothing until a program installs an SDK.
func WithMeterProvider(mp metric.MeterProvider) ConnOption {
	return connOption(func(c *connConfig) { c.tel.meters = mp })
}

// WithTracerProvider records the family's spans through tp. Without it the
// global provider (otel.GetTracerProvider) is used, which records nothing
// until a program installs an SDK with otel.SetTracerProvider.
func WithTracerProvider(tp trace.TracerProvider) ConnOption {
	return connOption(func(c *connConfig) { c.tel.tracers = tp })
}

// Options shared by publishers and consumers, consumers and queues.

type codecOption struct {
	carrier // carries c to the packages built on acemq that take ConsumeOption values (rpc, route)
	c       Codec
}

// carrier is embedded in codecOption, unexported: engine.Carried reads the
// codec through it.
type carrier = engine.Carrier

func (o codecOption) applyPublisher(c *publisherConfig) { c.codec = o.c }
func (o codecOption) applyConsume(c *consumeConfig)     { c.codec = o.c }

// WithCodec chooses the codec: for a publisher, the one it writes with; for
// a consumer, the one it reads with (codec.Composite reads several formats).
// The default is JSON.
func WithCodec(c Codec) CodecOption { return codecOption{engine.Carry(c), c} }

type retryOption struct {
	declare.Option // what topology.Topology.Queue declares for the policy
	p              retry.Policy
}

func (o retryOption) applyConsume(c *consumeConfig) { c.retry, c.retrySet = o.p, true }

// WithRetry sets a consumer's retry policy. Given to topology.Topology.Queue, it
// declares the policy's retry rungs, the acemq.retry exchange and the
// return binding with the queue, as a consumer with that policy would. A
// consumer given no WithRetry takes the policy its queue was declared with
// by a topology applied on the same connection or given with WithTopology,
// and retry.None (one attempt) when there is none; a consumer given another
// policy than its queue's is refused with an error wrapping
// ErrRetryPolicyMismatch that names both (docs/retries.md). A policy built
// with nonsensical values (retry.Exponential(0, …),
// GiveUpAfter(-time.Second)) is refused there, with an error saying what
// to change.
func WithRetry(p retry.Policy) RetryOption {
	return retryOption{declare.WithRetry(declare.Retry{Policy: p, Rungs: engine.PolicyOf(p).BrokerRungs(), Err: p.Err()}), p}
}

// NewPublisher's options.

type publisherConfig struct {
	codec           Codec
	transient       bool
	allowUnroutable bool
	intercept       []PublishInterceptor
}

// validate checks NewPublisher's options.
func (c *publisherConfig) validate() error {
	switch {
	case c.codec == nil:
		return errNoCodec
	case nilPublish(c.intercept):
		return errors.New("acemq: WithPublishInterceptors was given a nil interceptor: drop it")
	}
	return nil
}

type publisherOption func(*publisherConfig)

func (f publisherOption) applyPublisher(c *publisherConfig) { f(c) }

// WithPersistent(false) publishes with delivery mode 1: the broker may lose
// the messages on restart. The default is persistent.
func WithPersistent(on bool) PublisherOption {
	return publisherOption(func(c *publisherConfig) { c.transient = !on })
}

// WithMandatory(false) turns the mandatory flag off: a message no queue
// takes is dropped silently instead of failing with a *driver.ReturnError.
// The default is mandatory.
func WithMandatory(on bool) PublisherOption {
	return publisherOption(func(c *publisherConfig) { c.allowUnroutable = !on })
}

// Send's options.

type sendConfig struct {
	// env is WithEnvelope's envelope, nil without one. Send copies it
	// once, onto its own stack, and sends the copy.
	env         *Envelope
	ttl         time.Duration
	ttlSet      bool
	priority    uint8
	prioritySet bool
}

// validate checks Send's options.
func (c *sendConfig) validate() error {
	if c.ttlSet && c.ttl < 0 {
		return fmt.Errorf("acemq: WithExpiration(%s): a time to live must not be negative (0 expires the message unless a consumer takes it at once)", c.ttl)
	}
	return nil
}

// envelopeOption is WithEnvelope's option, a pointer to its own copy of
// the envelope: Send applies it, like the others, with a type switch and no
// call through a function value, and reads the envelope through the
// pointer, so that neither the option nor the send copies the large
// Envelope more than once.
type envelopeOption struct{ env Envelope }

func (o *envelopeOption) applySend(c *sendConfig) { c.env = &o.env }

// WithEnvelope sends with env (built with NewEnvelope, or a delivered
// message's envelope changed with Envelope.Change) instead of a fresh
// envelope. An empty origin is stamped with the connection's. Unknown
// x-acemq-* headers a delivered envelope carries are not sent: they belong
// to republishes of that delivery, not to a message the application
// publishes.
func WithEnvelope(env Envelope) SendOption { return &envelopeOption{env} }

// expirationOption and priorityOption are applied by Send with a type
// switch, like envelopeOption, so they stay off the heap.
type expirationOption time.Duration

func (o expirationOption) applySend(c *sendConfig) { c.ttl, c.ttlSet = time.Duration(o), true }

type priorityOption uint8

func (o priorityOption) applySend(c *sendConfig) { c.priority, c.prioritySet = uint8(o), true }

// WithExpiration gives the message its own time to live (the AMQP
// expiration property, whole milliseconds, rounded up): a message still
// on a queue ttl after it was enqueued there expires, and the broker
// dead-letters it (reason expired) when the queue has a dead-letter
// exchange (topology.WithDeadLettering sends it to {queue}.dlq), or drops it. A
// queue's own x-message-ttl applies too; the shorter wins. The broker acts
// on a message's own expiry only when it reaches the head of the queue,
// so an expired message behind one that lives longer waits its turn
// (docs/expiry-and-priority.md). Library republishes (retries, dead letters) do not
// carry it. ttl must not be negative.
func WithExpiration(ttl time.Duration) SendOption { return expirationOption(ttl) }

// WithPriority sends the message with an AMQP priority (0, the default, to
// 255). Only a queue declared with topology.WithMaxPriority orders by it (highest
// first, capped at the queue's maximum); other queues ignore it. Retries
// and set-asides keep it.
func WithPriority(p uint8) SendOption { return priorityOption(p) }

// Consume's options.

type consumeConfig struct {
	codec        Codec
	concurrency  int
	prefetch     int
	tag          string
	retry        retry.Policy
	retrySet     bool
	noDeclare    bool
	drainTimeout time.Duration
	topology     []*topology.Topology
	args         driver.Table                   // WithConsumerArguments
	argsErr      error                          // a WithConsumerArguments value AMQP cannot carry
	orderKey     func(m Message[[]byte]) string // WithOrderKey (order.go)

	// The pipeline (pipeline.go, breaker.go).
	intercept     []ConsumeInterceptor
	middleware    []any // Middleware[T] of the consumer's T
	nilMiddleware bool  // WithMiddleware was given a nil one
	breaker       *Breaker

	unknown    Handler[[]byte] // WithUnknownType (types.go)
	unknownSet bool
}

// validate checks Consume's options.
func (c *consumeConfig) validate() error {
	switch {
	case c.concurrency < 1:
		return fmt.Errorf("acemq: WithConcurrency(%d): at least one handler must run; the default is 1", c.concurrency)
	case c.prefetch < 0:
		return fmt.Errorf("acemq: WithPrefetch(%d): the prefetch must be 0 (no limit) or more; the default is %d", c.prefetch, DefaultPrefetch)
	case c.drainTimeout <= 0:
		return fmt.Errorf("acemq: WithDrainTimeout(%s): the drain timeout must be positive; the default is %s", c.drainTimeout, DefaultDrainTimeout)
	case c.codec == nil:
		return errNoCodec
	case c.noDeclare && len(c.topology) > 0:
		return errors.New("acemq: WithDeclarations(false) and WithTopology contradict each other: drop one")
	case c.argsErr != nil:
		return fmt.Errorf("acemq: WithConsumerArguments: %w", c.argsErr)
	case nilConsume(c.intercept):
		return errors.New("acemq: WithConsumeInterceptors was given a nil interceptor: drop it")
	case c.nilMiddleware:
		return errors.New("acemq: WithMiddleware was given a nil middleware: drop it")
	case c.unknownSet && c.unknown == nil:
		return errors.New("acemq: WithUnknownType(nil): pass the handler that decides what to do with a type nobody registered")
	}
	return c.breaker.check()
}

type consumeOption func(*consumeConfig)

func (f consumeOption) applyConsume(c *consumeConfig) { f(c) }

// WithConcurrency runs n handlers at once (default 1). With 1, deliveries
// are handled one at a time in the order the broker delivers them (a
// retried message comes back later, behind newer ones); with more, in no
// particular order.
func WithConcurrency(n int) ConsumeOption {
	return consumeOption(func(c *consumeConfig) { c.concurrency = n })
}

// WithPrefetch sets how many unacknowledged deliveries the broker hands
// the consumer at once (default 20). A delivery holds its slot until it is
// settled, including while a retry waits in the consumer. 0 means no limit,
// which lets the broker push a whole queue into memory.
func WithPrefetch(n int) ConsumeOption {
	return consumeOption(func(c *consumeConfig) { c.prefetch = n })
}

// WithConsumerTag sets the consumer tag (default acemq-{queue}).
func WithConsumerTag(tag string) ConsumeOption {
	return consumeOption(func(c *consumeConfig) { c.tag = tag })
}

// WithDeclarations(false) starts the consumer without declaring anything:
// no acemq.dlx, {queue}.dlq, {queue}.parked or rungs. Set-asides then fail
// (and the message is put back) when those queues do not exist. The
// default declares them.
func WithDeclarations(on bool) ConsumeOption {
	return consumeOption(func(c *consumeConfig) { c.noDeclare = !on })
}

// WithDrainTimeout bounds how long Close waits for running handlers
// (default 20 s). d must be positive.
func WithDrainTimeout(d time.Duration) ConsumeOption {
	return consumeOption(func(c *consumeConfig) { c.drainTimeout = d })
}

// WithTopology applies t (topology.Topology.Apply) when the consumer starts, before
// the consumer's own declarations, so that one call declares the
// application's queue and consumes it. It cannot be combined with
// WithDeclarations(false).
func WithTopology(t *topology.Topology) ConsumeOption {
	return consumeOption(func(c *consumeConfig) {
		if t != nil {
			c.topology = append(c.topology, t)
		}
	})
}

// WithConsumerArguments sets the consumer arguments of the subscription
// (basic.consume), for example x-priority. Their values are checked and
// converted as topology.WithArguments' are. To read a stream use package stream,
// which sets x-stream-offset itself and resumes from where it got to.
func WithConsumerArguments(args map[string]any) ConsumeOption {
	return consumeOption(func(c *consumeConfig) { c.args, c.argsErr = field.Table(args) })
}

// WithOrderKey keeps the messages that share a key in order while
// WithConcurrency runs several handlers: key names each delivery's key
// (from its routing key, a header of its envelope or its raw body, which
// m.Payload holds). Messages with the same key are handled one at a time,
// in the order the broker delivered them; messages with different keys run
// in parallel. A message waits, holding its prefetch slot, while an earlier
// one with its key runs. A retried message comes back later, behind newer
// ones with its key, as with one handler. key must be fast and must not
// block. See docs/ordering.md.
func WithOrderKey(key func(m Message[[]byte]) string) ConsumeOption {
	return consumeOption(func(c *consumeConfig) { c.orderKey = key })
}

// The pipeline's options (docs/pipeline.md): interceptors on a connection,
// publisher or consumer; a consumer's middleware and circuit breaker; a
// connection's logger.

// An InterceptorOption adds interceptors. Given to Connect, they run for
// every publisher or consumer of the connection; given to NewPublisher or
// Consume, for that one only, after the connection's.
type InterceptorOption interface {
	ConnOption
	PublisherOption
	ConsumeOption
}

type interceptors struct {
	publish []PublishInterceptor
	consume []ConsumeInterceptor
}

func (o interceptors) applyConn(c *connConfig) {
	c.publishIcpt = append(c.publishIcpt, o.publish...)
	c.consumeIcpt = append(c.consumeIcpt, o.consume...)
}

func (o interceptors) applyPublisher(c *publisherConfig) {
	c.intercept = append(c.intercept, o.publish...)
}

func (o interceptors) applyConsume(c *consumeConfig) {
	c.intercept = append(c.intercept, o.consume...)
}

// WithPublishInterceptors adds publish interceptors, run in the order
// given. Given to Connect they run for every publisher of the connection,
// before those given to NewPublisher. Consumers ignore them.
func WithPublishInterceptors(fs ...PublishInterceptor) InterceptorOption {
	return interceptors{publish: fs}
}

// WithConsumeInterceptors adds consume interceptors, run in the order
// given. Given to Connect they run for every consumer of the connection,
// before those given to Consume. Publishers ignore them.
func WithConsumeInterceptors(fs ...ConsumeInterceptor) InterceptorOption {
	return interceptors{consume: fs}
}

// WithMiddleware wraps the consumer's handler in mw, the first given
// outermost: WithMiddleware(a, b) runs a, then b, then the handler, and b's
// Ack passes through a on the way out. Several WithMiddleware options add
// up, in order. The chain is built once, when the consumer starts; a
// consumer of a type other than T refuses to start.
func WithMiddleware[T any](mw ...Middleware[T]) ConsumeOption {
	return consumeOption(func(c *consumeConfig) {
		for _, m := range mw {
			if m == nil {
				c.nilMiddleware = true
				continue
			}
			c.middleware = append(c.middleware, m)
		}
	})
}

// WithBreaker gives the consumer a circuit breaker. While it is open the
// consumer is paused (as Pause pauses it), and a failure that opened it or
// happened while it was open is put back on the queue unchanged (nack with
// requeue, attempt unchanged; Settlement.Outcome is OutcomeRequeued) rather
// than retried or dead-lettered: the downstream failed, not the message.
// After CoolDown it subscribes again and runs one delivery as a probe: a
// success closes the breaker, a failure opens it for another cool-down.
// Its state is in Consumer.Breaker, Conn.Health (degraded while not
// closed), the acemq.consume.breaker.state gauge and the log. Options that
// make no sense (no way to open, a CoolDown that is not positive) are
// refused by Consume.
func WithBreaker(b Breaker) ConsumeOption {
	return consumeOption(func(c *consumeConfig) { c.breaker = &b })
}

// WithLogger logs the connection's operator-level events through l:
// the connection lost, reconnecting, recovered and its topology
// redeclared, blocked and unblocked by the broker; a consumer that stopped
// without Close, was paused or resumed, whose drain ran out or whose
// circuit breaker opened or closed; and a delivery that could not be set
// aside or settled as decided. Nothing is logged per message: use
// middleware.Log for that. The default is no logger: nothing is printed.
// URLs are logged with their password redacted, and no header value or
// body is ever logged.
func WithLogger(l *slog.Logger) ConnOption {
	return connOption(func(c *connConfig) { c.logger = l })
}

// errNoCodec is the error of a publisher or consumer given WithCodec(nil).
var errNoCodec = errors.New("acemq: WithCodec was given a nil codec: pass JSON, Text, Bytes, a codec.Composite or a codec of your own")

// nilPublish and nilConsume report whether a list of interceptors holds a
// nil one.
func nilPublish(fs []PublishInterceptor) bool {
	for _, f := range fs {
		if f == nil {
			return true
		}
	}
	return false
}

func nilConsume(fs []ConsumeInterceptor) bool {
	for _, f := range fs {
		if f == nil {
			return true
		}
	}
	return false
}
