package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"net"
	"net/url"
	"strconv"
	"strings"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq/driver"
)

// connect dials a session and prepares its channels. With redeclare, the
// recorded topology is declared again first.
func (c *conn) connect(ctx context.Context, redeclare bool) (*session, error) {
	ac, ep, err := c.dialAny(ctx)
	if err != nil {
		return nil, err
	}
	// Abort the set-up if the connection is closed meanwhile.
	stop := context.AfterFunc(ctx, func() { _ = ac.CloseDeadline(time.Now().Add(time.Second)) })
	defer stop()
	s := &session{
		c:        c,
		ac:       ac,
		endpoint: ep,
		dead:     make(chan struct{}),
		closeCh:  ac.NotifyClose(make(chan *amqp.Error, 1)),
		blockCh:  ac.NotifyBlocked(make(chan amqp.Blocking, 8)),
	}
	fail := func(err error) (*session, error) {
		_ = s.close()
		c.eps.dialed(ep, false) // a node that cannot be set up goes last
		return nil, fmt.Errorf("%s: %w", driver.RedactURL(c.cfg.URLs[ep]), err)
	}
	if redeclare {
		if err := c.topo.redeclare(ac); err != nil {
			return fail(err)
		}
	}
	for range publishChannels {
		sl := &slot{confirm: true}
		if err := s.openPubChan(sl); err != nil {
			return fail(fmt.Errorf("opening a publishing channel: %w", err))
		}
		s.confirmSlots = append(s.confirmSlots, sl)
	}
	if c.cfg.NoConfirms {
		sl := &slot{}
		if err := s.openPubChan(sl); err != nil {
			return fail(fmt.Errorf("opening a publishing channel: %w", err))
		}
		s.rawSlot = sl
	}
	return s, nil
}

// remember records a that coalesces acks, for close.
func (s *session) remember(a *acker) {
	if a.co == nil {
		return
	}
	s.ackMu.Lock()
	if s.ackers == nil {
		s.ackers = map[*acker]struct{}{}
	}
	s.ackers[a] = struct{}{}
	s.ackMu.Unlock()
}

// forget removes what remember recorded.
func (s *session) forget(a *acker) {
	if a.co == nil {
		return
	}
	s.ackMu.Lock()
	delete(s.ackers, a)
	s.ackMu.Unlock()
}

// close closes the connection, after sending the acks its subscriptions'
// channels hold back (unless the broker has blocked the connection: it
// reads nothing then, and they would wait for it; their messages are
// redelivered).
func (s *session) close() error {
	s.ackMu.Lock()
	ackers := make([]*acker, 0, len(s.ackers))
	for a := range s.ackers {
		ackers = append(ackers, a)
	}
	s.ackMu.Unlock()
	if s.c.blocked.Load() == nil && !s.lost.Load() {
		for _, a := range ackers {
			a.co.close()
		}
	}
	err := s.ac.CloseDeadline(time.Now().Add(closeTimeout))
	if errors.Is(err, amqp.ErrClosed) {
		return nil
	}
	return err
}

// dialAny makes one round of dials over the endpoints (see endpoints) and
// returns the first connection made and its endpoint's index. Each dial is
// bounded by endpointTimeout and ctx; when every endpoint fails, the error
// names each URL (without its password) and what went wrong, and is marked
// driver.Permanent when every endpoint failed in a way no retry can fix
// (see permanentDial).
func (c *conn) dialAny(ctx context.Context) (*amqp.Connection, int, error) {
	var errs []error
	permanent := true
	timeout := c.endpointTimeout()
	for _, i := range c.eps.round() {
		raw := c.cfg.URLs[i]
		ac, err := c.dial(ctx, raw, timeout)
		c.eps.dialed(i, err == nil)
		if err == nil {
			return ac, i, nil
		}
		permanent = permanent && permanentDial(err)
		errs = append(errs, fmt.Errorf("%s: %w", driver.RedactURL(raw), err))
		if ctx.Err() != nil {
			break
		}
	}
	err := errs[0]
	if len(errs) > 1 {
		err = errors.Join(errs...)
	}
	if permanent {
		err = driver.Permanent(err)
	}
	return nil, -1, err
}

// dial makes one connection attempt to rawURL within timeout and ctx.
// The returned error never contains a password.
func (c *conn) dial(ctx context.Context, rawURL string, timeout time.Duration) (*amqp.Connection, error) {
	u, err := driver.ParseURL(rawURL)
	if err != nil {
		return nil, err
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()

	props := amqp.Table{
		"product":  Product,
		"version":  "1",
		"platform": "Go",
	}
	if c.cfg.Name != "" {
		props["connection_name"] = c.cfg.Name
	} else {
		props["connection_name"] = Product
	}
	acfg := amqp.Config{Properties: props, Locale: "en_US"}
	var secret string // the provider's password, scrubbed from errors too
	if c.cfg.Credentials != nil {
		cr, err := c.cfg.Credentials(ctx)
		if err != nil {
			return nil, fmt.Errorf("the credentials provider failed: %w", err)
		}
		acfg.SASL = []amqp.Authentication{&amqp.PlainAuth{Username: cr.Username, Password: cr.Password}}
		secret = cr.Password
	}
	if u.Scheme == "amqps" {
		acfg.TLSClientConfig = clientTLS(c.cfg.TLS, u.Hostname())
	}
	var (
		nc   net.Conn
		stop func() bool
	)
	acfg.Dial = func(network, addr string) (net.Conn, error) {
		var d net.Dialer
		conn, err := d.DialContext(ctx, network, addr)
		if err != nil {
			return nil, err
		}
		if dl, ok := ctx.Deadline(); ok {
			_ = conn.SetDeadline(dl)
		}
		nc = conn
		stop = context.AfterFunc(ctx, func() { _ = conn.SetDeadline(time.Unix(1, 0)) })
		return conn, nil
	}
	ac, err := amqp.DialConfig(rawURL, acfg)
	if stop != nil && !stop() && err == nil {
		// ctx ended during or just after the handshake.
		_ = ac.CloseDeadline(time.Now())
		ac, err = nil, ctx.Err()
	}
	if err != nil {
		if nc != nil {
			_ = nc.Close()
		}
		if ctx.Err() != nil && !errors.Is(err, ctx.Err()) {
			err = fmt.Errorf("%w: %w", ctx.Err(), err)
		}
		return nil, scrubSecret(scrub(driver.Redact(err), u), secret)
	}
	return ac, nil
}

// scrub removes the password of u from err's text.
func scrub(err error, u *url.URL) error {
	if err == nil || u == nil || u.User == nil {
		return err
	}
	p, ok := u.User.Password()
	if !ok {
		return err
	}
	return scrubSecret(err, p)
}

// scrubSecret removes secret from err's text, keeping err in the chain for
// errors.Is and errors.As.
func scrubSecret(err error, secret string) error {
	if err == nil || secret == "" || !strings.Contains(err.Error(), secret) {
		return err
	}
	return &scrubbed{msg: strings.ReplaceAll(err.Error(), secret, "xxxxx"), err: err}
}

type scrubbed struct {
	msg string
	err error
}

func (e *scrubbed) Error() string { return e.msg }

func (e *scrubbed) Unwrap() error { return e.err }

func capabilitiesOf(ac *amqp.Connection) *driver.Capabilities {
	major, minor := 0, 0
	if v, ok := ac.Properties["version"].(string); ok {
		parts := strings.SplitN(v, ".", 3)
		if len(parts) >= 2 {
			major, _ = strconv.Atoi(parts[0])
			minor, _ = strconv.Atoi(parts[1])
		}
	}
	atLeast := func(ma, mi int) bool { return major > ma || (major == ma && minor >= mi) }
	return &driver.Capabilities{
		PublisherConfirms: true,
		DeadLettering:     true,
		QuorumQueues:      atLeast(3, 8),
		Streams:           atLeast(3, 9),
		Recovery:          true,
	}
}
