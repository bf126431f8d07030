package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/driver"
	amqp "github.com/rabbitmq/amqp091-go"
)

// Product is the client product name the driver announces to the broker,
// and the connection name when driver.Config.Name is empty.
const Product = "AceMQ for Go"

// Defaults applied to zero values of driver.Config.
const (
	DefaultMaxOutstanding = 1000
	DefaultConfirmTimeout = 10 * time.Second
	DefaultDialTimeout    = 30 * time.Second
)

// Reconnection backoff: the first retry waits about backoffBase, each
// further one twice as long, up to backoffCap. Variables so that tests can
// shorten them.
var (
	backoffBase = time.Second
	backoffCap  = 30 * time.Second
)

// publishChannels is the number of confirm-mode publishing channels per
// connection; publishes are spread over them round robin.
var publishChannels = 1

// closeTimeout bounds the connection.close handshake in Close.
const closeTimeout = 5 * time.Second

func init() {
	driver.Register("amqp", Driver{})
	driver.Register("amqps", Driver{})
}

// Driver is the RabbitMQ driver. It is registered for the "amqp" and
// "amqps" schemes; applications normally reach it through the acemq package
// rather than directly.
type Driver struct{}

// Open implements driver.Driver: it connects to the broker, trying cfg.URLs
// in turn, and returns the connection. Zero values in cfg mean the
// documented defaults. The first connection is made within ctx; if every
// URL fails, Open returns an error (with passwords removed) and does not
// retry. An error that retrying cannot fix (a refused login or virtual
// host, a certificate that does not verify, a URL it cannot use, on every
// URL) is marked with driver.Permanent, so that acemq.WithWaitForBroker
// stops at it. Once open, a lost connection is recovered in the background
// until Close. Applications reach it through acemq.Connect.
func (Driver) Open(ctx context.Context, cfg driver.Config) (driver.Conn, error) {
	c, err := open(ctx, cfg)
	if err != nil {
		return nil, err // not a nil *conn in a non-nil interface
	}
	return c, nil
}

func open(ctx context.Context, cfg driver.Config) (*conn, error) {
	if err := checkConfig(&cfg); err != nil {
		return nil, driver.Permanent(err)
	}
	c := &conn{
		cfg:     cfg,
		permits: newPermits(cfg.MaxOutstanding),
		clock:   newConfirmClock(cfg.ConfirmTimeout),
		closing: make(chan struct{}),
		up:      make(chan struct{}),
		subs:    map[*subscription]struct{}{},
	}
	c.eps = newEndpoints(len(cfg.URLs), firstEndpoint(len(cfg.URLs)))
	c.ctx, c.cancel = context.WithCancel(context.Background())
	c.topo.init()
	stop := context.AfterFunc(ctx, c.cancel)
	s, err := c.connect(c.ctx, false)
	stop()
	if err != nil {
		c.cancel()
		c.wg.Wait()
		if ctx.Err() != nil {
			err = fmt.Errorf("%w (%w)", ctx.Err(), err)
		}
		return nil, fmt.Errorf("rabbitmq: cannot connect to the broker: %w", err)
	}
	c.markUp(s)
	c.wg.Add(1)
	go c.supervise(s)
	return c, nil
}

func checkConfig(cfg *driver.Config) error {
	if len(cfg.URLs) == 0 {
		return errors.New("rabbitmq: no broker URL is configured")
	}
	urls := make([]string, len(cfg.URLs))
	copy(urls, cfg.URLs)
	cfg.URLs = urls
	for _, raw := range cfg.URLs {
		u, err := driver.ParseURL(raw)
		if err != nil {
			return fmt.Errorf("rabbitmq: the broker URL cannot be parsed: %w", err)
		}
		switch u.Scheme {
		case "amqp":
			if cfg.TLS != nil {
				return fmt.Errorf("rabbitmq: a TLS configuration is set but the URL %s is not encrypted; use an amqps:// URL to connect over TLS", driver.RedactURL(raw))
			}
		case "amqps":
		default:
			return fmt.Errorf("rabbitmq: the URL %s is not an amqp:// or amqps:// URL", driver.RedactURL(raw))
		}
		if _, err := amqp.ParseURI(raw); err != nil {
			return fmt.Errorf("rabbitmq: the broker URL %s is invalid: %w", driver.RedactURL(raw), scrub(driver.Redact(err), u))
		}
	}
	if cfg.MaxOutstanding <= 0 {
		cfg.MaxOutstanding = DefaultMaxOutstanding
	}
	if cfg.ConfirmTimeout <= 0 {
		cfg.ConfirmTimeout = DefaultConfirmTimeout
	}
	if cfg.DialTimeout <= 0 {
		cfg.DialTimeout = DefaultDialTimeout
	}
	if cfg.EndpointTimeout <= 0 {
		cfg.EndpointTimeout = DefaultEndpointTimeout
	}
	return nil
}

// conn implements driver.Conn.
type conn struct {
	cfg     driver.Config
	permits *permits      // publish permits: one per publish awaiting a confirm
	clock   *confirmClock // times the waits for confirms
	closing chan struct{} // closed by Close
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup // every goroutine of the driver's
	eps     *endpoints     // the rotation over cfg.URLs

	// cur is the current session: nil while reconnecting. It may be dead
	// for a moment before the supervisor notices (s.ac.IsClosed()).
	cur     atomic.Pointer[session]
	blocked atomic.Pointer[string] // the broker's reason while blocked
	caps    atomic.Pointer[driver.Capabilities]
	tagSeq  atomic.Uint64

	mu     sync.Mutex
	closed bool          // set by Close, under mu
	up     chan struct{} // closed when cur is set
	subs   map[*subscription]struct{}

	topo topology
	// exchanges known to exist: a publish to any other exchange checks it
	// first, because publishing to a missing exchange closes the
	// publishing channel, failing every publish outstanding on it.
	exchanges sync.Map

	// publishes whose callers stopped waiting for their confirms
	abMu       sync.Mutex
	abandoned  []*pending
	abandonedN atomic.Int32
	// The queues of the PublishEach calls in progress, whose confirmed but
	// unreported publishes a publish short of a permit may take the
	// permits of (reclaim). lentMu is taken before a queue's mu.
	lentMu sync.Mutex
	lent   map[*eachQueue]struct{}
	lentN  atomic.Int32
}

// conn implements driver.Conn and every optional interface a Conn may have.
var _ interface {
	driver.Conn
	driver.Inspector
	driver.Deleter
	driver.Getter
	driver.BatchPublisher
	driver.EachPublisher
	driver.Pinger
	driver.BlockReporter
	driver.CapabilityReporter
	driver.Unbinder
	driver.EndpointReporter
} = (*conn)(nil)

// session is one AMQP connection and the channels the driver keeps on it.
type session struct {
	c        *conn
	ac       *amqp.Connection
	endpoint int           // the index in cfg.URLs of the URL dialled
	lost     atomic.Bool   // set by markDown, before dead closes and EventLost
	dead     chan struct{} // closed once the supervisor has noticed the loss
	closeCh  chan *amqp.Error
	blockCh  chan amqp.Blocking

	confirmSlots []*slot
	rawSlot      *slot // confirms off (cfg.NoConfirms), nil otherwise
	rr           atomic.Uint32

	getMu sync.Mutex
	getCh *amqp.Channel
	getAk *acker

	// the ackers of the subscriptions' channels that hold acks back,
	// which close flushes
	ackMu  sync.Mutex
	ackers map[*acker]struct{}
}

// String describes the connection without revealing a password.
func (c *conn) String() string {
	name := c.cfg.Name
	if name == "" {
		name = Product
	}
	at := c.Endpoint()
	if at == "" {
		at = driver.RedactURL(c.cfg.URLs[0]) + " (reconnecting)"
	}
	return fmt.Sprintf("rabbitmq connection %q to %s", name, at)
}

// Endpoint is the URL (without its password) of the node the connection is
// on, one of the configured URLs; "" while it is down or reconnecting.
func (c *conn) Endpoint() string {
	if s := c.cur.Load(); s != nil && !s.ac.IsClosed() {
		return driver.RedactURL(c.cfg.URLs[s.endpoint])
	}
	return ""
}

func (c *conn) isClosing() bool {
	select {
	case <-c.closing:
		return true
	default:
		return false
	}
}

// spawn runs fn on a tracked goroutine, unless the connection is closed.
func (c *conn) spawn(fn func()) bool {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return false
	}
	c.wg.Add(1)
	c.mu.Unlock()
	go func() {
		defer c.wg.Done()
		fn()
	}()
	return true
}

// do runs fn on a tracked goroutine and waits for it within ctx. amqp091
// calls take no context; when ctx ends first, do returns ctx's error and,
// once fn has finished successfully, runs undo (if not nil) to release what
// fn acquired.
func (c *conn) do(ctx context.Context, fn func() error, undo func()) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	done := make(chan error, 1)
	var mu sync.Mutex
	abandoned := false
	if !c.spawn(func() {
		err := fn()
		mu.Lock()
		defer mu.Unlock()
		if abandoned {
			if err == nil && undo != nil {
				undo()
			}
			return
		}
		done <- err
	}) {
		return driver.ErrClosed
	}
	select {
	case err := <-done:
		return err
	case <-ctx.Done():
		mu.Lock()
		defer mu.Unlock()
		select {
		case err := <-done:
			return err
		default:
			abandoned = true
			return ctx.Err()
		}
	}
}

// waitSession returns a live session, waiting for recovery within ctx (and
// until stop closes, when stop is not nil).
func (c *conn) waitSession(ctx context.Context, stop <-chan struct{}) (*session, error) {
	for {
		var wake <-chan struct{}
		if s := c.cur.Load(); s != nil {
			if !s.ac.IsClosed() {
				return s, nil
			}
			wake = s.dead // lost, but the supervisor has not noticed yet
		} else {
			c.mu.Lock()
			up, closed := c.up, c.closed
			c.mu.Unlock()
			if closed {
				return nil, driver.ErrClosed
			}
			wake = up
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return nil, fmt.Errorf("waiting for the connection to recover: %w", ctx.Err())
		case <-c.closing:
			return nil, driver.ErrClosed
		case <-stop:
			return nil, errStopped
		}
	}
}

var errStopped = errors.New("stopped")

// Capabilities reports what the broker of the most recent connection
// supports, from its version in the server properties.
func (c *conn) Capabilities() driver.Capabilities {
	if p := c.caps.Load(); p != nil {
		return *p
	}
	return driver.Capabilities{PublisherConfirms: true, DeadLettering: true, Recovery: true}
}

// Blocked reports whether the broker has blocked the connection, and why.
func (c *conn) Blocked() (bool, string) {
	if r := c.blocked.Load(); r != nil {
		return true, *r
	}
	return false, ""
}

func blockedError(reason string) error {
	return fmt.Errorf("rabbitmq: %w: %s", driver.ErrBlocked, reason)
}

// Ping opens and closes a channel within ctx. While the broker blocks the
// connection it returns nil without a round trip (a blocked broker stops
// reading); while the connection is down it fails at once.
func (c *conn) Ping(ctx context.Context) error {
	if c.isClosing() {
		return driver.ErrClosed
	}
	if r := c.blocked.Load(); r != nil {
		return nil
	}
	s := c.cur.Load()
	if s == nil || s.ac.IsClosed() {
		return errors.New("rabbitmq: the connection to the broker is down; reconnecting")
	}
	err := c.do(ctx, func() error {
		ch, err := s.ac.Channel()
		if err != nil {
			return err
		}
		return ch.Close()
	}, nil)
	if err != nil {
		return fmt.Errorf("rabbitmq: the broker did not answer: %w", err)
	}
	return nil
}

// Close closes the connection: reconnection stops, every subscription ends
// and its Deliveries channel closes, and publishes still awaiting a confirm
// fail with an error wrapping driver.ErrLost. It waits for the driver's
// goroutines to finish, so it must not be called from an OnEvent callback
// (call it from another goroutine). Closing twice is harmless.
func (c *conn) Close() error {
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		return nil
	}
	c.closed = true
	close(c.closing)
	subs := make([]*subscription, 0, len(c.subs))
	for s := range c.subs {
		subs = append(subs, s)
	}
	c.mu.Unlock()
	c.cancel()
	for _, s := range subs {
		s.abort()
	}
	// The supervisor closes the current session when it sees closing.
	c.wg.Wait()
	return nil
}
