package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/driver"
	amqp "github.com/rabbitmq/amqp091-go"
)

// subscription implements driver.Subscription and driver.Receiver.
//
// Deliveries are taken from the current attachment (an amqp091 channel and
// consumer) by whoever calls Receive: the acemq engine's workers read
// amqp091's delivery channel themselves, with no goroutine of the driver's
// in between. When an attachment's delivery channel closes, the first
// reader to see it decides what follows (the end, or a new attachment after
// the channel or connection died) while the others wait for that decision.
// Deliveries, for callers that want a channel, is a goroutine pumping
// Receive into one.
type subscription struct {
	c    *conn
	spec driver.ConsumeSpec
	args amqp.Table

	stop     chan struct{} // Cancel or Close: no more (re)subscribing
	quit     chan struct{} // Close or Conn.Close: stop handing up at once
	stopOnce sync.Once
	quitOnce sync.Once

	cur atomic.Pointer[attachment] // the attachment Receive reads; nil once ended

	mu      sync.Mutex
	att     *attachment // the latest attachment, kept after the end for Close
	outOnce sync.Once
	out     chan driver.Delivery
	pumped  chan struct{} // closed when the Deliveries pump has returned
}

type attachment struct {
	s    *session
	ch   *amqp.Channel
	dels <-chan amqp.Delivery
	ack  *acker

	// over decides, once, what follows this attachment; readers that see
	// its delivery channel close all go through it and wait for it.
	over sync.Once

	// A basic.cancel and a channel.close must not wait for their replies
	// on the channel at once: amqp091 hands each reply to whichever call
	// takes it first, so the channel.close-ok can reach the cancel and
	// Channel.Close then waits for ever. close waits for a cancel in
	// progress, and no cancel starts once close has begun.
	opMu      sync.Mutex
	canceling chan struct{} // closed when the basic.cancel in progress returns; nil if none
	closing   bool          // close has begun
}

// cancelWait bounds how long closing an attachment waits for a
// basic.cancel in progress (one whose caller gave up) before leaving the
// channel.close to the cancel's goroutine. A variable so that tests can
// shorten it.
var cancelWait = closeTimeout

// cancel sends basic.cancel for tag and waits for the broker's reply
// within ctx. When ctx ends first the call goes on in the background, and
// close waits for it before closing the channel. A cancel after close has
// begun does nothing: the close ends the deliveries.
func (a *attachment) cancel(ctx context.Context, c *conn, tag string) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	a.opMu.Lock()
	if a.closing {
		a.opMu.Unlock()
		return nil
	}
	prev := a.canceling
	done := make(chan struct{})
	res := make(chan error, 1)
	if !c.spawn(func() {
		defer close(done)
		if prev != nil {
			<-prev // one basic.cancel at a time
		}
		res <- a.ch.Cancel(tag, false)
	}) {
		a.opMu.Unlock()
		return driver.ErrClosed
	}
	a.canceling = done
	a.opMu.Unlock()
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		select {
		case err := <-res:
			return err
		default:
			return ctx.Err()
		}
	}
}

// close sends the acks waiting on the attachment's channel, then closes
// it, once a basic.cancel in progress has returned. When the cancel has
// not returned within cancelWait (the broker does not answer), the
// channel is closed by a goroutine once it does, or by the connection's
// close.
func (a *attachment) close() {
	if a == nil {
		return
	}
	a.s.forget(a.ack)
	a.opMu.Lock()
	if a.closing {
		a.opMu.Unlock()
		return
	}
	a.closing = true
	pending := a.canceling
	a.opMu.Unlock()
	if pending != nil {
		select {
		case <-pending:
		default:
			t := time.NewTimer(cancelWait)
			defer t.Stop()
			select {
			case <-pending:
			case <-t.C:
				a.s.c.spawn(func() {
					<-pending
					a.shut()
				})
				return
			}
		}
	}
	a.shut()
}

// shut sends the acks waiting on the attachment's channel and closes it.
func (a *attachment) shut() {
	if !a.ch.IsClosed() {
		if a.ack.co != nil {
			a.ack.co.close()
		}
		_ = a.ch.Close()
	}
}

// Consume starts a subscription on its own channel, with the spec's
// prefetch. It waits for recovery within ctx if the connection is down.
func (c *conn) Consume(ctx context.Context, spec driver.ConsumeSpec) (driver.Subscription, error) {
	args, err := toAMQPTable(spec.Args)
	if err != nil {
		return nil, fmt.Errorf("rabbitmq: consume from queue %q: %w", spec.Queue, err)
	}
	if spec.Tag == "" {
		spec.Tag = "acemq-" + spec.Queue + "-" + strconv.FormatUint(c.tagSeq.Add(1), 10)
	}
	sub := &subscription{
		c:    c,
		spec: spec,
		args: args,
		stop: make(chan struct{}),
		quit: make(chan struct{}),
	}
	var att *attachment
	for {
		s, err := c.waitSession(ctx, nil)
		if err != nil {
			return nil, err
		}
		err = c.do(ctx, func() error {
			var err error
			att, err = sub.attach(s)
			return err
		}, func() { att.close() })
		if err == nil {
			break
		}
		if connectionLost(s, err) && !c.isClosing() && ctx.Err() == nil {
			continue
		}
		return nil, mapErr("consume from", "queue", spec.Queue, err)
	}
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		att.close()
		return nil, driver.ErrClosed
	}
	sub.att = att
	sub.cur.Store(att)
	c.subs[sub] = struct{}{}
	c.mu.Unlock()
	return sub, nil
}

// attach opens a channel on s and subscribes on it.
func (sub *subscription) attach(s *session) (*attachment, error) {
	ch, err := s.ac.Channel()
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*attachment, error) {
		if !ch.IsClosed() {
			_ = ch.Close()
		}
		return nil, err
	}
	if sub.spec.Prefetch > 0 {
		if err := ch.Qos(sub.spec.Prefetch, 0, false); err != nil {
			return fail(err)
		}
	}
	dels, err := ch.Consume(sub.spec.Queue, sub.spec.Tag, false, sub.spec.Exclusive, false, false, sub.args)
	if err != nil {
		return fail(err)
	}
	ack := newAcker(s, ch, ackBatchSize(sub.spec.Prefetch))
	s.remember(ack)
	return &attachment{s: s, ch: ch, dels: dels, ack: ack}, nil
}

// resume replaces the consumer arguments with what spec.Resume says before
// a resubscription (a stream reader's offset reached so far). Arguments that
// cannot be carried keep the previous ones.
func (sub *subscription) resume() {
	if sub.spec.Resume == nil {
		return
	}
	if args, err := toAMQPTable(sub.spec.Resume()); err == nil {
		sub.args = args
	}
}

func (sub *subscription) stopped() bool {
	select {
	case <-sub.stop:
		return true
	default:
		return false
	}
}

// Receive returns the next delivery, or false once the subscription has
// ended: after Cancel when what the broker had sent has been handed up, at
// once after Close or Conn.Close, or when the broker cancelled the consumer
// or refused to resubscribe. A lost channel or connection does not end it:
// Receive waits while the subscription attaches again. Safe for concurrent
// use.
func (sub *subscription) Receive() (dd driver.Delivery, ok bool) {
	att := sub.cur.Load()
	for att != nil {
		var d amqp.Delivery
		// A delivery already waiting is taken without a full select: in a
		// steady stream amqp091's sender is usually there first.
		select {
		case d, ok = <-att.dels:
			if co := att.ack.co; co != nil {
				co.handed.Add(1)
				if !co.busy.Load() {
					co.busy.Store(true)
				}
			}
		default:
			var quit bool
			if ok, quit = sub.await(att, &d); quit {
				return driver.Delivery{}, false
			}
		}
		if ok {
			fillDelivery(&dd, &d, att.ack, sub.spec.UnconvertedHeaders)
			return dd, true
		}
		att.ack.flush() // after Cancel the channel is still open
		att.over.Do(func() { sub.next(att) })
		att = sub.cur.Load()
	}
	return driver.Delivery{}, false
}

// await waits for the next delivery of att when none was waiting, and
// writes it to d (a delivery is large: returning it would copy it once
// more for every message). When acks wait, it first gives the goroutines
// that hand deliveries over (amqp091's) a turn and looks again, so that a
// busy consumer sends its acks in batches (with one CPU, amqp091's
// goroutine is ready but not yet waiting when the worker comes back) while
// one with nothing more to do sends them at once and is no longer busy. A
// reader that then waited while other readers took deliveries (a consumer
// with several workers, each waiting its turn) marks the subscription busy
// again when its own delivery comes: deliveries keep arriving, only not to
// it. quit is true after Close.
func (sub *subscription) await(att *attachment, d *amqp.Delivery) (ok, quit bool) {
	co := att.ack.co
	if co == nil {
		select {
		case *d, ok = <-att.dels:
			return ok, false
		case <-sub.quit:
			return false, true
		}
	}
	if co.pending.Load() {
		runtime.Gosched()
		select {
		case *d, ok = <-att.dels:
			co.handed.Add(1)
			return ok, false
		default:
		}
		co.busy.Store(false)
		_ = co.flush()
	}
	seen := co.handed.Load()
	select {
	case *d, ok = <-att.dels:
		if ok && co.handed.Add(1) != seen+1 && !co.busy.Load() {
			co.busy.Store(true) // others took deliveries while it waited
		}
		return ok, false
	case <-sub.quit:
		return false, true
	}
}

// next decides what follows att, whose delivery channel has closed: a new
// attachment when the channel or connection died, else the end.
func (sub *subscription) next(att *attachment) {
	c := sub.c
	c.mu.Lock()
	if c.closed {
		c.mu.Unlock()
		sub.end()
		return
	}
	c.wg.Add(1) // Conn.Close waits for a resubscription in progress
	c.mu.Unlock()
	defer c.wg.Done()
	switch {
	case sub.stopped():
		// Cancel or Close: with Cancel the channel stays open so that
		// deliveries already handed up can still be settled; Close
		// closes it.
	case !att.ch.IsClosed():
		// The broker cancelled the consumer (its queue was deleted,
		// say): the subscription ends.
		att.close()
	default:
		att.s.forget(att.ack) // its channel is gone, and what waited with it
		if n := sub.reattach(); n != nil {
			sub.cur.Store(n)
			return
		}
	}
	sub.end()
}

// end marks the subscription ended: Receive returns false from now on.
func (sub *subscription) end() {
	sub.cur.Store(nil)
	sub.unregister()
}

// unregister removes the subscription from those Conn.Close aborts.
func (sub *subscription) unregister() {
	sub.c.mu.Lock()
	delete(sub.c.subs, sub)
	sub.c.mu.Unlock()
}

// reattach subscribes again after the channel died: on the same
// connection if only the channel failed, else on the recovered one. It returns
// nil when the subscription is stopped, the connection closed, or the
// broker refuses the subscription (its queue is gone, say).
func (sub *subscription) reattach() *attachment {
	c := sub.c
	refusals := 0
	for {
		s, err := c.waitSession(context.Background(), sub.stop)
		if err != nil {
			return nil
		}
		sub.resume()
		att, err := sub.attach(s)
		if err == nil {
			sub.mu.Lock()
			if sub.stopped() {
				sub.mu.Unlock()
				att.close()
				return nil
			}
			sub.att = att
			sub.mu.Unlock()
			return att
		}
		if s.ac.IsClosed() {
			continue
		}
		// The connection is up but the broker refused. An exclusive
		// queue or consumer of the lost connection may linger until the
		// broker notices that connection is gone (up to its heartbeat
		// timeout), so keep trying for a while, declaring a recorded
		// queue again if it is missing; a missing queue the connection
		// did not declare ends the subscription.
		code := 0
		var ae *amqp.Error
		if errors.As(err, &ae) {
			code = ae.Code
		}
		recorded := c.topo.hasQueue(sub.spec.Queue)
		if code == amqp.NotFound && !recorded {
			return nil
		}
		if refusals++; refusals > 60 {
			return nil
		}
		if recorded && (code == amqp.NotFound || code == amqp.ResourceLocked) {
			_ = c.topo.redeclareQueue(s.ac, sub.spec.Queue)
		}
		t := time.NewTimer(min(time.Duration(refusals)*200*time.Millisecond, 2*time.Second))
		select {
		case <-t.C:
		case <-sub.stop:
			t.Stop()
			return nil
		case <-s.dead:
			t.Stop()
		}
	}
}

// Deliveries returns a channel the subscription's deliveries arrive on,
// pumped from Receive by a goroutine started on the first call. It closes
// when Receive would return false. Use either Deliveries or Receive on one
// subscription, not both.
func (sub *subscription) Deliveries() <-chan driver.Delivery {
	sub.outOnce.Do(func() {
		sub.mu.Lock()
		sub.out = make(chan driver.Delivery)
		sub.pumped = make(chan struct{})
		sub.mu.Unlock()
		c := sub.c
		c.mu.Lock()
		if c.closed {
			c.mu.Unlock()
			close(sub.out)
			close(sub.pumped)
			return
		}
		c.wg.Add(1)
		c.mu.Unlock()
		go sub.pump()
	})
	return sub.out
}

func (sub *subscription) pump() {
	defer sub.c.wg.Done()
	defer close(sub.pumped)
	defer close(sub.out)
	for {
		d, ok := sub.Receive()
		if !ok {
			return
		}
		select {
		case sub.out <- d:
		case <-sub.quit:
			return
		}
	}
}

// Tag returns the consumer tag.
func (sub *subscription) Tag() string { return sub.spec.Tag }

// Cancel stops new deliveries with basic.cancel; Receive returns false (and
// Deliveries closes) once what the broker had already sent has been handed
// up. The channel stays open so that those deliveries can still be
// settled; Close releases it.
func (sub *subscription) Cancel(ctx context.Context) error {
	sub.mu.Lock()
	sub.stopOnce.Do(func() { close(sub.stop) })
	att := sub.att
	sub.mu.Unlock()
	if att == nil || att.ch.IsClosed() {
		return nil
	}
	att.ack.flush()
	err := att.cancel(ctx, sub.c, sub.spec.Tag)
	if err != nil && !att.ch.IsClosed() && !errors.Is(err, driver.ErrClosed) {
		return fmt.Errorf("rabbitmq: cancelling consumer %q: %w", sub.spec.Tag, err)
	}
	return nil
}

// Close cancels the subscription and closes its channel: deliveries not yet
// settled go back to the queue, marked redelivered. Receive returns false
// and Deliveries closes.
func (sub *subscription) Close() error {
	sub.abort()
	sub.mu.Lock()
	pumped := sub.pumped
	sub.mu.Unlock()
	if pumped != nil {
		<-pumped
	}
	// A resubscription in progress sees stop and closes what it opened;
	// the latest attachment is closed here.
	sub.mu.Lock()
	att := sub.att
	sub.mu.Unlock()
	if !sub.c.isClosing() {
		att.close()
	}
	sub.unregister()
	return nil
}

// abort ends the subscription because the connection is closing.
func (sub *subscription) abort() {
	sub.mu.Lock()
	sub.stopOnce.Do(func() { close(sub.stop) })
	sub.mu.Unlock()
	sub.quitOnce.Do(func() { close(sub.quit) })
}
