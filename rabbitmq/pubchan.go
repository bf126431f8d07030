package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/driver"
	amqp "github.com/rabbitmq/amqp091-go"
)

// slot holds the current pubChan of one publishing position on a session.
// When a channel dies while its connection lives on (a channel error), the
// watcher installs a replacement.
type slot struct {
	confirm bool
	pc      atomic.Pointer[pubChan]
}

func (sl *slot) get() *pubChan { return sl.pc.Load() }

type pubChan struct {
	s       *session
	sl      *slot
	ch      *amqp.Channel
	confirm bool
	rets    chan amqp.Return
	closes  chan *amqp.Error
	reason  atomic.Pointer[amqp.Error] // why the channel closed
	closed  chan struct{}              // closed once reason is set
	gone    chan struct{}              // closed once a replacement was tried

	// qmu guards the list of outstanding mandatory publishes (oldest,
	// newest and each pending's prev and next) and draining rets.
	qmu            sync.Mutex
	oldest, newest *pending
}

// openPubChan opens a publishing channel for sl and starts its watcher.
func (s *session) openPubChan(sl *slot) error {
	ch, err := s.ac.Channel()
	if err != nil {
		return err
	}
	pc := &pubChan{
		s:       s,
		sl:      sl,
		ch:      ch,
		confirm: sl.confirm,
		closed:  make(chan struct{}),
		gone:    make(chan struct{}),
	}
	pc.closes = ch.NotifyClose(make(chan *amqp.Error, 1))
	if pc.confirm {
		if err := ch.Confirm(false); err != nil {
			_ = ch.Close()
			return err
		}
		// Every return belongs to an outstanding mandatory publish (at
		// most MaxOutstanding) and is drained when that publish
		// completes, so this buffer does not fill up.
		pc.rets = ch.NotifyReturn(make(chan amqp.Return, s.c.cfg.MaxOutstanding+16))
	}
	s.c.wg.Add(1)
	go pc.watch()
	sl.pc.Store(pc)
	return nil
}

// send writes one message. With confirms it returns the pending to wait on.
func (pc *pubChan) send(ctx context.Context, m *driver.Message, pub *amqp.Publishing) (*pending, error) {
	var p *pending
	if pc.confirm {
		p = getPending()
		p.pc = pc
		p.mandatory = m.Mandatory
		p.msgID = m.MessageID
		p.exchange = m.Exchange
		p.routingKey = m.RoutingKey
		if p.tracked() {
			pc.qmu.Lock()
			pc.link(p)
			pc.qmu.Unlock()
		}
	}
	dc, err := pc.ch.PublishWithDeferredConfirmWithContext(ctx, m.Exchange, m.RoutingKey, m.Mandatory, false, *pub)
	if err != nil {
		if p != nil {
			if p.tracked() {
				pc.qmu.Lock()
				pc.unlink(p)
				pc.qmu.Unlock()
			}
			putPending(p)
		}
		// A write that fails on the socket means the connection is dying,
		// even if the reader has not noticed yet: treat it like a closed
		// channel, not as a failure of this message.
		var ne net.Error
		if errors.Is(err, amqp.ErrClosed) || pc.ch.IsClosed() || errors.As(err, &ne) ||
			errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) {
			return nil, errGone
		}
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("rabbitmq: the publish failed: %w", err)
	}
	if p != nil {
		p.dc = dc
	}
	return p, nil
}

// link appends p to the list of outstanding mandatory publishes. qmu held.
func (pc *pubChan) link(p *pending) {
	p.prev, p.next = pc.newest, nil
	if pc.newest != nil {
		pc.newest.next = p
	} else {
		pc.oldest = p
	}
	pc.newest = p
}

// unlink removes p from the list. qmu held.
func (pc *pubChan) unlink(p *pending) {
	if p.prev != nil {
		p.prev.next = p.next
	} else if pc.oldest == p {
		pc.oldest = p.next
	}
	if p.next != nil {
		p.next.prev = p.prev
	} else if pc.newest == p {
		pc.newest = p.prev
	}
	p.prev, p.next = nil, nil
}

// drainReturns records every buffered return on the oldest outstanding
// publish with its message-id, exchange and routing key that has none yet;
// returns that match no publish are dropped. qmu held. It walks the list:
// returns are rare, and the list is at most MaxOutstanding long, so the
// common publish pays for a link and an unlink, not for an index.
func (pc *pubChan) drainReturns() {
	for {
		select {
		case r, ok := <-pc.rets:
			if !ok {
				return
			}
			if r.MessageId == "" {
				continue
			}
			// The library republishes a delivered message (retry, dead
			// letter) with its original message-id, so the id alone can
			// name two outstanding publishes: match the destination too.
			for p := pc.oldest; p != nil; p = p.next {
				if p.ret == nil && p.msgID == r.MessageId && p.exchange == r.Exchange && p.routingKey == r.RoutingKey {
					p.ret = &driver.ReturnError{
						Exchange:   r.Exchange,
						RoutingKey: r.RoutingKey,
						Code:       int(r.ReplyCode),
						Text:       r.ReplyText,
					}
					break
				}
			}
		default:
			return
		}
	}
}

// watch waits for the channel to close, records why, and installs a
// replacement when the connection lives on.
func (pc *pubChan) watch() {
	c := pc.s.c
	defer c.wg.Done()
	var reason *amqp.Error
	for e := range pc.closes {
		if e != nil {
			reason = e
		}
	}
	if reason != nil {
		pc.reason.Store(reason)
		if reason.Code == amqp.NotFound {
			// An exchange was deleted behind our back: check it again
			// before the next publish to it.
			if _, rest, ok := strings.Cut(reason.Reason, "no exchange '"); ok {
				if name, _, ok := strings.Cut(rest, "'"); ok {
					c.exchanges.Delete(name)
				}
			}
		}
	}
	close(pc.closed)
	pc.replace()
	close(pc.gone)
}

func lostError(p *pending, reason *amqp.Error, closing bool) error {
	if reason != nil && reason.Code == amqp.NotFound && p.exchange != "" &&
		strings.Contains(reason.Reason, "no exchange '"+p.exchange+"'") {
		return fmt.Errorf("rabbitmq: the exchange %q does not exist (%s): %w", p.exchange, reason.Reason, driver.ErrNotFound)
	}
	if closing {
		return fmt.Errorf("rabbitmq: %w: %w", driver.ErrClosed, driver.ErrLost)
	}
	if reason != nil {
		return fmt.Errorf("rabbitmq: %w (%s)", driver.ErrLost, reason.Reason)
	}
	return fmt.Errorf("rabbitmq: %w", driver.ErrLost)
}

func (pc *pubChan) replace() {
	s := pc.s
	c := s.c
	delay := 50 * time.Millisecond
	for !s.ac.IsClosed() && !c.isClosing() {
		if err := s.openPubChan(pc.sl); err == nil {
			return
		}
		t := time.NewTimer(delay)
		select {
		case <-t.C:
		case <-s.dead:
			t.Stop()
			return
		case <-c.closing:
			t.Stop()
			return
		}
		delay = min(2*delay, 2*time.Second)
	}
}
