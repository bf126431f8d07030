package acemq

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"time"

	"github.com/acemq/acemq/driver"
)

// The backoff of WithWaitForBroker: the first retry waits about
// waitBackoffBase, each further one twice as long, up to waitBackoffCap.
// Variables so that tests can shorten them.
var (
	waitBackoffBase = time.Second
	waitBackoffCap  = 30 * time.Second
)

// waitBackoff is the wait before retry n (from 1): waitBackoffBase doubling
// up to waitBackoffCap, with ±20 % jitter, never above the cap.
func waitBackoff(n int) time.Duration {
	d := waitBackoffBase
	for i := 1; i < n && d < waitBackoffCap; i++ {
		d *= 2
	}
	d = min(d, waitBackoffCap)
	j := time.Duration((rand.Float64()*0.4 - 0.2) * float64(d))
	return min(d+j, waitBackoffCap)
}

// openWaiting opens the driver connection. With WithWaitForBroker, a
// failed attempt is followed by others, with backoff, until one succeeds,
// one fails permanently (driver.ErrPermanent) or ctx ends.
func (c *Conn) openWaiting(ctx context.Context, d driver.Driver, cfg driver.Config, wait bool) (driver.Conn, error) {
	t, err := d.Open(ctx, cfg)
	if err == nil || !wait {
		return t, err
	}
	for attempt := 1; ; attempt++ {
		if errors.Is(err, driver.ErrPermanent) {
			return nil, err
		}
		if ctx.Err() != nil {
			return nil, c.gaveUp(ctx, attempt, err)
		}
		delay := waitBackoff(attempt)
		c.waitEvent(driver.Event{Kind: driver.EventRetrying, Attempt: attempt, Delay: delay, Err: err})
		timer := time.NewTimer(delay)
		select {
		case <-timer.C:
		case <-ctx.Done():
			timer.Stop()
			return nil, c.gaveUp(ctx, attempt, err)
		}
		if t, err = d.Open(ctx, cfg); err == nil {
			e := driver.Event{Kind: driver.EventRecovered, Attempt: attempt}
			if r, ok := t.(driver.EndpointReporter); ok {
				e.Endpoint = r.Endpoint()
			}
			c.waitEvent(e)
			return t, nil
		}
	}
}

// gaveUp is the error of a wait that ctx ended: it wraps ctx.Err() and the
// last attempt's error.
func (c *Conn) gaveUp(ctx context.Context, attempts int, last error) error {
	if errors.Is(last, ctx.Err()) {
		return fmt.Errorf("gave up waiting for the broker after %d attempts: %w", attempts, last)
	}
	return fmt.Errorf("gave up waiting for the broker after %d attempts: %w (the last attempt: %w)", attempts, ctx.Err(), last)
}

// waitEvent reports an event of the first connection's wait to the
// metrics and the WithOnConnEvent functions, and logs it.
func (c *Conn) waitEvent(e driver.Event) {
	c.obs.connEvent(e)
	switch e.Kind {
	case driver.EventRetrying:
		c.log.Warn("acemq: the broker is not reachable yet; waiting for it (WithWaitForBroker)", slog.Int("attempt", e.Attempt), slog.Duration("delay", e.Delay), safeErr(e.Err))
	case driver.EventRecovered:
		c.log.Info("acemq: connected to the broker after waiting for it", slog.Int("attempt", e.Attempt), slog.String("endpoint", e.Endpoint))
	}
	for _, f := range c.events {
		f(e)
	}
}
