package acemq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/wire"
	_ "github.com/acemq/acemq/memory" // memory:// is built in
)

// Conn is a connection to a broker through a registered driver: memory://
// is built in; amqp:// and amqps:// need a blank import of
// github.com/acemq/acemq/rabbitmq. It is safe for concurrent use.
type Conn struct {
	handle // found by engine.Of: the packages built on acemq reach eng through it
	t      driver.Conn
	url    string
	name   string
	origin string
	obs    *observer
	eng    *engine.Conn
	clock  driver.Clock // the broker's (driver.Clocked), else real time

	mu       sync.Mutex
	hooks    map[int]func(Settlement)
	nextHook int
	// listeners is hooks in the order registered, rebuilt under mu on
	// every change and read without a lock on every settlement.
	listeners atomic.Pointer[[]func(Settlement)]
	consumers map[*consumerCore]struct{}
	closed    bool
	events    []func(driver.Event)

	// The pipeline (pipeline.go, logging.go).
	publishIcpt []PublishInterceptor
	consumeIcpt []ConsumeInterceptor
	log         *slog.Logger
}

// Errors a caller tells apart with errors.Is.
var (
	// ErrBlocked is wrapped by a publish refused because the broker has
	// blocked the connection (a resource alarm). Nothing was published.
	ErrBlocked = driver.ErrBlocked
	// ErrLost is wrapped by a publish whose connection died before its
	// confirm: the message may or may not have arrived.
	ErrLost = driver.ErrLost
	// ErrNotFound is wrapped by queues.Inspect and queues.Browse when the
	// queue does not exist, and by a publish to an exchange that does not
	// exist.
	ErrNotFound = driver.ErrNotFound
	// ErrClosed is wrapped by what is asked of a closed connection.
	ErrClosed = driver.ErrClosed
	// ErrUnsupported is wrapped when the connection's driver cannot do what
	// was asked (for example a driver without passive checks cannot
	// inspect a queue).
	ErrUnsupported = errors.ErrUnsupported
)

// handle is embedded in Conn, unexported: engine.Of finds the engine
// through it, and applications see nothing of it.
type handle = engine.Handle

// Connect opens a connection to the broker at url ("memory://NAME",
// "amqp://user:pass@host:5672/vhost", "amqps://…"). The first connection
// is made within ctx; once open, a lost connection is recovered in the
// background (RabbitMQ) until Close.
//
// url may list a cluster's nodes, separated by commas:
// "amqp://u:p@node1:5672/,amqp://u:p@node2:5672/". A comma starts a new URL
// only where a scheme and "://" follow it, so commas elsewhere (in a
// password, say) are kept. The list is the same as giving the first URL
// and the others with WithFallbackURLs (which add after them); see
// docs/connecting.md for the order in which the RabbitMQ driver dials them.
//
// By default a first connection that fails fails Connect; with
// WithWaitForBroker, Connect keeps dialling, with backoff, within ctx.
func Connect(ctx context.Context, url string, opts ...ConnOption) (*Conn, error) {
	if strings.TrimSpace(url) == "" {
		return nil, errors.New("acemq: Connect needs a broker URL, for example memory://demo (one process's own broker) or amqp://guest:guest@localhost:5672/")
	}
	var cfg connConfig
	for _, o := range opts {
		o.applyConn(&cfg)
	}
	if err := cfg.validate(); err != nil {
		return nil, err
	}
	urls := driver.SplitURLs(url)
	url = urls[0]
	fallback := append(urls[1:len(urls):len(urls)], cfg.fallback...)
	d, err := driver.Lookup(url)
	if err != nil {
		return nil, fmt.Errorf("acemq: connecting to %s: %w", driver.RedactURL(url), err)
	}
	if err := sameScheme(url, fallback); err != nil {
		return nil, err
	}
	shown := make([]string, len(urls))
	for i, u := range urls {
		shown[i] = driver.RedactURL(u)
	}
	c := &Conn{
		url:       strings.Join(shown, ","),
		name:      cfg.drv.Name,
		origin:    cfg.origin,
		hooks:     map[int]func(Settlement){},
		consumers: map[*consumerCore]struct{}{},
		events:    cfg.onEvent,

		publishIcpt: cfg.publishIcpt,
		consumeIcpt: cfg.consumeIcpt,
	}
	c.log = newConnLogger(cfg.logger, cfg.drv.Name, c.url)
	if c.origin == "" {
		c.origin = wire.DefaultOrigin()
	}
	c.obs = newObserver(cfg.tel)
	cfg.drv.URLs = append([]string{url}, fallback...)
	cfg.drv.OnEvent = c.dispatchEvent
	t, err := c.openWaiting(ctx, d, cfg.drv, cfg.wait)
	if err != nil {
		return nil, fmt.Errorf("acemq: connecting to %s: %w", c.url, driver.Redact(err))
	}
	c.t = t
	c.clock = driver.ClockOf(t)
	c.eng = engine.NewConn(t, connTelemetry{c.obs}, c.log, newEnvelopeWriter)
	c.handle = engine.NewHandle(c.eng)
	c.obs.watch(c, cfg.drv.NoConfirms)
	return c, nil
}

func (c *Conn) dispatchEvent(e driver.Event) {
	c.obs.connEvent(e)
	c.logEvent(e)
	for _, f := range c.events {
		f(e)
	}
}

// Origin is the origin stamped on messages published without one.
func (c *Conn) Origin() string { return c.origin }

// Name is the connection name given with WithName.
func (c *Conn) Name() string { return c.name }

// URL is the broker URL given to Connect, with any password redacted (a
// comma-separated list stays one). Endpoint says which node the connection
// is on.
func (c *Conn) URL() string { return c.url }

// Clock is the time the connection's broker keeps: real time, except on a
// memory:// broker given a clock of a test's own (memory.SetClock,
// acemqtest.NewClock), whose TTLs, rungs and timers move only when the
// test advances it. The consumers' in-consumer waits and in-progress
// delays and package schedule's due times run on it; code that computes
// times about messages (a due time for schedule.SendAt, say) can read it
// too, so that a test's clock moves it as well.
func (c *Conn) Clock() driver.Clock {
	if c.clock == nil {
		return driver.RealClock
	}
	return c.clock
}

// Endpoint is the URL of the node the connection is on now, one of the URLs
// given to Connect and WithFallbackURLs, with any password redacted; ""
// while the connection is down or reconnecting, or when the driver cannot
// say (it does not implement driver.EndpointReporter).
func (c *Conn) Endpoint() string {
	if r, ok := c.t.(driver.EndpointReporter); ok {
		return r.Endpoint()
	}
	return ""
}

// String describes the connection without its password.
func (c *Conn) String() string {
	if c.name != "" {
		return fmt.Sprintf("acemq.Conn(%s %s)", c.name, c.url)
	}
	return fmt.Sprintf("acemq.Conn(%s)", c.url)
}

// Blocked reports whether the broker has blocked publishing on this
// connection (a resource alarm) and the reason it gave.
func (c *Conn) Blocked() (bool, string) {
	if b, ok := c.t.(driver.BlockReporter); ok {
		return b.Blocked()
	}
	return false, ""
}

// Raw calls f with the driver connection underneath, for tests and tools
// that need what the portable API does not offer. f must not keep the
// driver connection, close it or use it after returning: the Conn owns it.
// Raw fails with ErrClosed once the connection is closed.
func (c *Conn) Raw(f func(driver.Conn) error) error {
	c.mu.Lock()
	closed := c.closed
	c.mu.Unlock()
	if closed {
		return fmt.Errorf("acemq: Raw on %s: %w", c, ErrClosed)
	}
	return f(c.t)
}

// Close stops every consumer started on the connection and closes the
// connection. The consumers drain at once, side by side, each within its
// drain timeout and all within ctx: ctx is the one shutdown deadline.
// Their *DrainError values, if any, are joined in the error returned,
// with an error for each consumer still closing its subscription when ctx
// ended; closing the connection ends those closes, and Close returns once
// they have.
func (c *Conn) Close(ctx context.Context) error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	cs := slices.Collect(maps.Keys(c.consumers))
	c.mu.Unlock()
	errs := make([]error, len(cs), len(cs)+1)
	var wg sync.WaitGroup
	for i, k := range cs {
		wg.Go(func() { errs[i] = k.close(ctx) })
	}
	wg.Wait()
	if err := c.t.Close(); err != nil {
		errs = append(errs, err)
	}
	c.eng.AwaitClosing() // the driver's Close ends the subscriptions' closes
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
	if s.SetAsideFailed != "" || s.SettleErr != nil {
		c.logSettlement(&s)
	}
	if fs := c.listeners.Load(); fs != nil {
		for _, f := range *fs {
			f(s)
		}
	}
}

// sameScheme refuses fallback URLs whose scheme differs from the first
// URL's: an amqp:// fallback behind amqps:// would connect unencrypted.
func sameScheme(first string, fallback []string) error {
	scheme := func(u string) string {
		s, _, _ := strings.Cut(u, "://")
		return strings.ToLower(s)
	}
	for _, f := range fallback {
		if scheme(f) != scheme(first) {
			return fmt.Errorf("acemq: the URL %s (in the list or WithFallbackURLs) does not have the scheme of %s; every URL of a connection must use the same one (amqps:// for all, to stay encrypted)", driver.RedactURL(f), driver.RedactURL(first))
		}
	}
	return nil
}
