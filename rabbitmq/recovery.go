package rabbitmq

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"time"

	"github.com/acemq/acemq/driver"
)

func (c *conn) markUp(s *session) {
	c.blocked.Store(nil)
	c.caps.Store(capabilitiesOf(s.ac))
	c.mu.Lock()
	c.cur.Store(s)
	close(c.up)
	c.mu.Unlock()
}

// markDown takes s out of service once the supervisor has noticed its
// loss. s.lost is set first, so that from then on no delivery of s can be
// settled (see acker) whatever amqp091 has closed so far.
func (c *conn) markDown(s *session) {
	s.lost.Store(true)
	c.mu.Lock()
	if c.cur.Load() == s {
		c.cur.Store(nil)
		c.up = make(chan struct{})
	}
	c.mu.Unlock()
	c.blocked.Store(nil)
	close(s.dead)
}

func (c *conn) emit(e driver.Event) {
	if c.cfg.OnEvent != nil {
		c.cfg.OnEvent(e)
	}
}

// supervise watches the current session: it reports blocking and, when the
// session is lost, reconnects until it succeeds or the connection closes.
//
// EventLost is emitted only after every delivery of the session reports it
// cannot be settled: markDown marks the session lost first (see acker), as
// amqp091 tells watch of the loss before it marks the session's channels
// closed. The acemq engine relies on this: it publishes a retry copy only
// of a delivery that can still be settled, since the broker redelivers the
// others.
func (c *conn) supervise(s *session) {
	defer c.wg.Done()
	for {
		cause := c.watch(s)
		if cause == nil {
			_ = s.close()
			return
		}
		c.markDown(s) // before EventLost: see above
		c.emit(driver.Event{Kind: driver.EventLost, Err: cause, Endpoint: driver.RedactURL(c.cfg.URLs[s.endpoint])})
		s = c.reconnect(cause)
		if s == nil {
			return
		}
	}
}

// watch returns the cause of the loss of s, or nil when the connection is
// being closed.
func (c *conn) watch(s *session) error {
	blocks := s.blockCh
	for {
		select {
		case <-c.closing:
			return nil
		case e, ok := <-s.closeCh:
			if c.isClosing() {
				return nil
			}
			if !ok || e == nil {
				return errors.New("the connection was closed")
			}
			return fmt.Errorf("the connection was closed: %w", e)
		case b, ok := <-blocks:
			if !ok {
				blocks = nil
				continue
			}
			if b.Active {
				reason := b.Reason
				c.blocked.Store(&reason)
				c.emit(driver.Event{Kind: driver.EventBlocked, Reason: reason})
			} else if c.blocked.Swap(nil) != nil {
				c.emit(driver.Event{Kind: driver.EventUnblocked})
			}
		}
	}
}

func (c *conn) reconnect(cause error) *session {
	last := cause
	for attempt := 1; ; attempt++ {
		if c.isClosing() {
			return nil
		}
		d := backoff(attempt)
		c.emit(driver.Event{Kind: driver.EventRetrying, Attempt: attempt, Delay: d, Err: last})
		t := time.NewTimer(d)
		select {
		case <-t.C:
		case <-c.closing:
			t.Stop()
			return nil
		}
		s, err := c.connect(c.ctx, true)
		if err != nil {
			last = err
			continue
		}
		if c.isClosing() {
			_ = s.close()
			return nil
		}
		c.markUp(s)
		c.emit(driver.Event{Kind: driver.EventRecovered, Attempt: attempt, Endpoint: driver.RedactURL(c.cfg.URLs[s.endpoint])})
		// connect(…, true) redeclared the recorded topology before the
		// session was marked up.
		c.emit(driver.Event{Kind: driver.EventRedeclared, Attempt: attempt})
		return s
	}
}

// backoff is the wait before reconnection attempt n (from 1): backoffBase
// doubling up to backoffCap, each with ±20 % jitter, never above the cap.
func backoff(n int) time.Duration {
	d := backoffBase
	for i := 1; i < n && d < backoffCap; i++ {
		d *= 2
	}
	d = min(d, backoffCap)
	j := time.Duration((rand.Float64()*0.4 - 0.2) * float64(d))
	return min(d+j, backoffCap)
}
