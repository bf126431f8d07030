package acemq

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"maps"
	"os"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/driver"
	_ "github.com/acemq/acemq/memory" // memory:// is built in
)

// Conn is a connection to a broker through a registered driver: memory://
// is built in; amqp:// and amqps:// need a blank import of
// github.com/acemq/acemq/rabbitmq. It is safe for concurrent use.
type Conn struct {
	t      driver.Conn
	url    string
	name   string
	origin string
	obs    *observer

	mu       sync.Mutex
	hooks    map[int]func(Settlement)
	nextHook int
	// listeners is hooks in the order registered, rebuilt under mu on
	// every change and read without a lock on every settlement.
	listeners atomic.Pointer[[]func(Settlement)]
	consumers map[*consumerCore]struct{}
	closed    bool
	events    []func(ConnEvent)
}

// ConnEvent is a connection state transition (lost, retrying, recovered,
// blocked, unblocked), reported to the functions given with OnConnEvent.
type ConnEvent = driver.Event

// Option configures Connect.
type Option func(*connConfig)

type connConfig struct {
	drv      driver.Config
	origin   string
	onEvent  []func(ConnEvent)
	tel      telemetryConfig
	fallback []string
}

// WithName names the connection; the broker shows the name in its
// management UI.
func WithName(name string) Option { return func(c *connConfig) { c.drv.Name = name } }

// WithOrigin sets the origin stamped on messages published without one
// (convention service@host). Default: acemq@{hostname}.
func WithOrigin(origin string) Option { return func(c *connConfig) { c.origin = origin } }

// WithFallbackURLs adds URLs (a cluster's other nodes) tried in turn after
// the first, on connecting and on every reconnection.
func WithFallbackURLs(urls ...string) Option {
	return func(c *connConfig) { c.fallback = append(c.fallback, urls...) }
}

// WithTLS sets the TLS configuration for amqps:// URLs. Nil verifies the
// broker with the system roots. Combined with an amqp:// URL it is refused.
func WithTLS(cfg *tls.Config) Option { return func(c *connConfig) { c.drv.TLS = cfg } }

// WithCredentials sets a credentials provider, consulted on every connection
// and reconnection; it overrides the user and password in the URL.
func WithCredentials(p CredentialsProvider) Option {
	return func(c *connConfig) { c.drv.Credentials = p }
}

// CredentialsProvider returns the user name and password to connect with.
type CredentialsProvider = func(ctx context.Context) (driver.Credentials, error)

// WithoutConfirms switches publisher confirms off for application
// publishes. Publishes the library makes itself are always confirmed.
func WithoutConfirms() Option { return func(c *connConfig) { c.drv.NoConfirms = true } }

// WithMaxOutstanding bounds the publishes awaiting a confirm (default 1000);
// at the bound, publishers wait for a permit.
func WithMaxOutstanding(n int) Option { return func(c *connConfig) { c.drv.MaxOutstanding = n } }

// WithConfirmTimeout bounds the wait for a permit to publish and for a
// confirm (default 10 s).
func WithConfirmTimeout(d time.Duration) Option {
	return func(c *connConfig) { c.drv.ConfirmTimeout = d }
}

// WithDialTimeout bounds one connection attempt (default 30 s).
func WithDialTimeout(d time.Duration) Option { return func(c *connConfig) { c.drv.DialTimeout = d } }

// OnConnEvent registers a function called for every connection state
// transition. It runs on the driver's goroutine and must not block.
func OnConnEvent(f func(ConnEvent)) Option {
	return func(c *connConfig) { c.onEvent = append(c.onEvent, f) }
}

// Connect opens a connection to the broker at url ("memory://NAME",
// "amqp://user:pass@host:5672/vhost", "amqps://…").
func Connect(ctx context.Context, url string, opts ...Option) (*Conn, error) {
	if strings.TrimSpace(url) == "" {
		return nil, errors.New("acemq: Connect needs a broker URL, for example memory://demo or amqp://guest:guest@localhost:5672/")
	}
	var cfg connConfig
	for _, o := range opts {
		o(&cfg)
	}
	d, err := driver.Lookup(url)
	if err != nil {
		return nil, err
	}
	c := &Conn{
		url:       driver.RedactURL(url),
		name:      cfg.drv.Name,
		origin:    cfg.origin,
		hooks:     map[int]func(Settlement){},
		consumers: map[*consumerCore]struct{}{},
		events:    cfg.onEvent,
	}
	if c.origin == "" {
		c.origin = DefaultOrigin()
	}
	c.obs = newObserver(cfg.tel)
	cfg.drv.URLs = append([]string{url}, cfg.fallback...)
	cfg.drv.OnEvent = c.dispatchEvent
	t, err := d.Open(ctx, cfg.drv)
	if err != nil {
		return nil, fmt.Errorf("acemq: connecting to %s: %w", c.url, driver.Redact(err))
	}
	c.t = t
	c.obs.watch(c, cfg.drv.NoConfirms)
	return c, nil
}

func (c *Conn) dispatchEvent(e driver.Event) {
	c.obs.connEvent(e)
	for _, f := range c.events {
		f(e)
	}
}

// DefaultOrigin is acemq@{hostname}, with "unknown-host" when the host name
// cannot be read.
func DefaultOrigin() string {
	h, err := os.Hostname()
	if err != nil || h == "" {
		h = "unknown-host"
	}
	return "acemq@" + h
}

// Origin is the origin stamped on messages published without one.
func (c *Conn) Origin() string { return c.origin }

// Name is the connection name given with WithName.
func (c *Conn) Name() string { return c.name }

// URL is the broker URL with any password redacted.
func (c *Conn) URL() string { return c.url }

// Transport is the driver connection underneath, for tools that need what
// the portable API does not offer (passive checks, basic.get).
func (c *Conn) Transport() driver.Conn { return c.t }

// Capabilities reports what the broker supports.
func (c *Conn) Capabilities() driver.Capabilities { return c.t.Capabilities() }

// Blocked reports whether the broker has blocked publishing on this
// connection (a resource alarm) and the reason it gave.
func (c *Conn) Blocked() (bool, string) { return c.t.Blocked() }

// Close stops every consumer started on the connection (each with its drain
// timeout, bounded by ctx) and closes the connection.
func (c *Conn) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cs := slices.Collect(maps.Keys(c.consumers))
	c.mu.Unlock()
	var errs []error
	for _, k := range cs {
		if err := k.close(ctx); err != nil {
			errs = append(errs, err)
		}
	}
	if err := c.t.Close(); err != nil {
		errs = append(errs, err)
	}
	c.obs.close()
	return errors.Join(errs...)
}

// OnSettle registers a function called once for every settled delivery of
// every consumer on this connection, after the broker actions are done. It
// returns a function that removes the registration. Several listeners may
// register; they run in the order registered, on the consumer's goroutine,
// and must not block.
func (c *Conn) OnSettle(f func(Settlement)) (remove func()) {
	c.mu.Lock()
	id := c.nextHook
	c.nextHook++
	c.hooks[id] = f
	c.storeListeners()
	c.mu.Unlock()
	return func() {
		c.mu.Lock()
		delete(c.hooks, id)
		c.storeListeners()
		c.mu.Unlock()
	}
}

// storeListeners publishes the hooks, in the order registered, for
// emitSettlement. Called with mu held.
func (c *Conn) storeListeners() {
	fs := make([]func(Settlement), 0, len(c.hooks))
	for _, id := range slices.Sorted(maps.Keys(c.hooks)) {
		fs = append(fs, c.hooks[id])
	}
	c.listeners.Store(&fs)
}

func (c *Conn) emitSettlement(s Settlement) {
	if s.end != nil {
		s.end(s)
	}
	c.obs.settled(s)
	if fs := c.listeners.Load(); fs != nil {
		for _, f := range *fs {
			f(s)
		}
	}
}

// Outbound is a fully formed message for Conn.Publish, the one publish path
// every library feature uses (publishers, retries, dead letters, replies,
// replays, pipeline hops).
type Outbound struct {
	Exchange   string
	RoutingKey string
	// Envelope is written into the headers; its zero value means a fresh one.
	Envelope    Envelope
	ContentType string
	Body        []byte
	// ReplyTo and CorrelationID set the AMQP properties of the same names.
	ReplyTo       string
	CorrelationID string
	// AllowUnroutable publishes without the mandatory flag: a message no
	// queue takes is dropped instead of failing with an *UnroutableError.
	AllowUnroutable bool
	// Transient publishes with delivery mode 1 instead of persistent.
	Transient bool
	// AlwaysConfirm waits for the broker's confirm even on a connection
	// opened WithoutConfirms. Publishes the library makes for itself
	// (pipeline hops, replays) set it.
	AlwaysConfirm bool
}

// UnroutableError reports a mandatory publish no queue took. Code and Text
// are the broker's (312 NO_ROUTE).
type UnroutableError = driver.ReturnError

// ErrBlocked is wrapped by a publish refused because the broker has blocked
// the connection (a resource alarm). Nothing was published.
var ErrBlocked = driver.ErrBlocked

// ErrLost is wrapped by a publish whose connection died before its confirm:
// the message may or may not have arrived.
var ErrLost = driver.ErrLost

// Publish sends one message with its envelope in the headers and, unless
// the connection's confirms are off, waits for the broker's confirm. It is
// mandatory unless AllowUnroutable is set: a message nothing routes fails
// with an *UnroutableError.
func (c *Conn) Publish(ctx context.Context, m Outbound) error {
	dm := c.outbound(m)
	start := time.Now()
	ctx, done := c.obs.publishStart(ctx, &dm, m.Envelope)
	err := c.t.Publish(ctx, dm)
	done(err, time.Since(start))
	return err
}

func (c *Conn) outbound(m Outbound) driver.Message {
	env := m.Envelope.orDefault()
	return driver.Message{
		Exchange:      m.Exchange,
		RoutingKey:    m.RoutingKey,
		Mandatory:     !m.AllowUnroutable,
		Transient:     m.Transient,
		AlwaysConfirm: m.AlwaysConfirm,
		ContentType:   m.ContentType,
		MessageID:     env.id,
		CorrelationID: m.CorrelationID,
		ReplyTo:       m.ReplyTo,
		Headers:       env.AppendHeaders(nil, m.RoutingKey),
		Body:          m.Body,
	}
}

// PublishBatch publishes every message, then awaits every confirm, and
// returns one error per message (nil for confirmed), in order.
func (c *Conn) PublishBatch(ctx context.Context, ms []Outbound) []error {
	dms := make([]driver.Message, len(ms))
	dones := make([]func(error, time.Duration), len(ms))
	for i, m := range ms {
		dms[i] = c.outbound(m)
		_, dones[i] = c.obs.publishStart(ctx, &dms[i], m.Envelope)
	}
	start := time.Now()
	errs := c.t.PublishBatch(ctx, dms)
	d := time.Since(start)
	for i, done := range dones {
		done(errs[i], d)
	}
	return errs
}
