package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/driver"
	amqp "github.com/rabbitmq/amqp091-go"
)

// A publish goes through one pubChan: an amqp091 channel plus a dispatcher
// goroutine that receives the channel's confirms and returns. Publishes
// are serialised on the channel (as amqp091 does anyway) only while their
// frames are written; each then waits for its own confirm on its own
// pending, without holding any lock.
//
// Confirm-mode delivery tags are assigned by the broker in publish order,
// starting at 1 on each channel, and amqp091 hands confirms to listeners
// resequenced in that order, so the outstanding publishes of a channel form
// a FIFO queue: each confirm settles the publish at the head. A
// basic.return arrives before the confirm of its publish on the same
// channel; the dispatcher handles both from one goroutine, with the return
// channel unbuffered, so the return is always recorded on its pending
// before the confirm settles it.

// slot holds the current pubChan of one publishing position on a session.
// When a channel dies while its connection lives on (a channel error), the
// dispatcher installs a replacement.
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
	confs   chan amqp.Confirmation
	rets    chan amqp.Return
	closes  chan *amqp.Error
	gone    chan struct{} // closed once dead, its pendings failed and a replacement tried

	mu   sync.Mutex // serialises sends; guards seq and dead
	seq  uint64     // delivery tag of the last publish
	dead bool

	qmu  sync.Mutex // guards q and byID; never held across I/O
	q    ring
	byID map[string]*pending // mandatory publishes by message-id, oldest first
}

// openPubChan opens a publishing channel for sl and starts its dispatcher.
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
		gone:    make(chan struct{}),
		byID:    map[string]*pending{},
	}
	pc.closes = ch.NotifyClose(make(chan *amqp.Error, 1))
	if pc.confirm {
		if err := ch.Confirm(false); err != nil {
			_ = ch.Close()
			return err
		}
		pc.confs = ch.NotifyPublish(make(chan amqp.Confirmation, s.c.cfg.MaxOutstanding+16))
		pc.rets = ch.NotifyReturn(make(chan amqp.Return))
	}
	s.c.wg.Add(1)
	go pc.run()
	sl.pc.Store(pc)
	return nil
}

// pending is one publish awaiting its confirm. Pendings are pooled; one
// whose publisher stopped waiting (timeout, ctx) is left to the collector.
type pending struct {
	seq        uint64
	mandatory  bool
	msgID      string
	exchange   string
	routingKey string
	ret        *driver.ReturnError // set by the dispatcher on basic.return
	next       *pending            // next newer mandatory pending with the same message-id
	done       chan error          // buffered: the dispatcher never blocks
	timer      *time.Timer
}

var pendingPool = sync.Pool{New: func() any { return &pending{done: make(chan error, 1)} }}

func getPending() *pending { return pendingPool.Get().(*pending) }

func putPending(p *pending) {
	p.ret, p.next = nil, nil
	p.msgID, p.exchange, p.routingKey = "", "", ""
	pendingPool.Put(p)
}

// ring is a FIFO queue of pendings.
type ring struct {
	buf  []*pending
	head int
	n    int
}

func (r *ring) push(p *pending) {
	if r.n == len(r.buf) {
		nb := make([]*pending, max(64, 2*len(r.buf)))
		for i := 0; i < r.n; i++ {
			nb[i] = r.buf[(r.head+i)%len(r.buf)]
		}
		r.buf, r.head = nb, 0
	}
	r.buf[(r.head+r.n)%len(r.buf)] = p
	r.n++
}

func (r *ring) front() *pending { return r.buf[r.head] }

func (r *ring) popFront() *pending {
	p := r.buf[r.head]
	r.buf[r.head] = nil
	r.head = (r.head + 1) % len(r.buf)
	r.n--
	return p
}

func (r *ring) popBack() {
	r.buf[(r.head+r.n-1)%len(r.buf)] = nil
	r.n--
}

// errGone: the channel died before the message was written; the publish
// can be retried on another channel.
var errGone = errors.New("publishing channel gone")

// send writes one message. With confirms it returns the pending to wait on.
func (pc *pubChan) send(ctx context.Context, m *driver.Message, pub *amqp.Publishing) (*pending, error) {
	var p *pending
	if pc.confirm {
		p = getPending()
		p.mandatory = m.Mandatory
		p.msgID = m.MessageID
		p.exchange = m.Exchange
		p.routingKey = m.RoutingKey
	}
	pc.mu.Lock()
	if pc.dead {
		pc.mu.Unlock()
		if p != nil {
			putPending(p)
		}
		return nil, errGone
	}
	if p != nil {
		pc.seq++
		p.seq = pc.seq
		pc.qmu.Lock()
		pc.q.push(p)
		if p.mandatory && p.msgID != "" {
			pc.linkID(p)
		}
		pc.qmu.Unlock()
	}
	err := pc.ch.PublishWithContext(ctx, m.Exchange, m.RoutingKey, m.Mandatory, false, *pub)
	if err != nil && p != nil {
		// Nothing was sent, so no confirm will come: take p back. It is
		// still the newest entry because pc.mu is held.
		pc.seq--
		pc.qmu.Lock()
		pc.q.popBack()
		if p.mandatory && p.msgID != "" {
			pc.unlinkNewest(p)
		}
		pc.qmu.Unlock()
	}
	pc.mu.Unlock()
	if err != nil {
		if p != nil {
			putPending(p)
		}
		if errors.Is(err, amqp.ErrClosed) || pc.ch.IsClosed() {
			return nil, errGone
		}
		if ctx.Err() != nil {
			return nil, err
		}
		return nil, fmt.Errorf("acemq: the publish failed: %w", err)
	}
	return p, nil
}

// linkID appends p to the chain of pendings with its message-id. qmu held.
func (pc *pubChan) linkID(p *pending) {
	first, ok := pc.byID[p.msgID]
	if !ok {
		pc.byID[p.msgID] = p
		return
	}
	for first.next != nil {
		first = first.next
	}
	first.next = p
}

// unlinkOldest removes p, the oldest pending with its id. qmu held.
func (pc *pubChan) unlinkOldest(p *pending) {
	if first := pc.byID[p.msgID]; first == p {
		if p.next != nil {
			pc.byID[p.msgID] = p.next
		} else {
			delete(pc.byID, p.msgID)
		}
	}
	p.next = nil
}

// unlinkNewest removes p, the newest pending with its id. qmu held.
func (pc *pubChan) unlinkNewest(p *pending) {
	first := pc.byID[p.msgID]
	if first == p {
		delete(pc.byID, p.msgID)
		return
	}
	for first != nil && first.next != p {
		first = first.next
	}
	if first != nil {
		first.next = nil
	}
}

// run is the dispatcher.
func (pc *pubChan) run() {
	defer pc.s.c.wg.Done()
	if pc.confirm {
		rets := pc.rets
	loop:
		for {
			select {
			case r, ok := <-rets:
				if !ok {
					rets = nil
					continue
				}
				pc.onReturn(&r)
			case cf, ok := <-pc.confs:
				if !ok {
					break loop
				}
				pc.onConfirm(cf)
			}
		}
	} else {
		for range pc.closes {
		}
	}
	pc.shutdown()
}

func (pc *pubChan) onReturn(r *amqp.Return) {
	if r.MessageId == "" {
		return
	}
	pc.qmu.Lock()
	for p := pc.byID[r.MessageId]; p != nil; p = p.next {
		if p.ret == nil {
			p.ret = &driver.ReturnError{
				Exchange:   r.Exchange,
				RoutingKey: r.RoutingKey,
				Code:       int(r.ReplyCode),
				Text:       r.ReplyText,
			}
			break
		}
	}
	pc.qmu.Unlock()
}

func (pc *pubChan) onConfirm(cf amqp.Confirmation) {
	for {
		pc.qmu.Lock()
		if pc.q.n == 0 || pc.q.front().seq > cf.DeliveryTag {
			pc.qmu.Unlock()
			return
		}
		p := pc.q.popFront()
		if p.mandatory && p.msgID != "" {
			pc.unlinkOldest(p)
		}
		pc.qmu.Unlock()
		switch {
		case p.seq < cf.DeliveryTag:
			// amqp091 dropped this confirm (a listener stalled for
			// seconds): the outcome is unknown.
			pc.resolve(p, fmt.Errorf("%w (its confirm was not received)", driver.ErrLost))
			continue
		case !cf.Ack:
			pc.resolve(p, fmt.Errorf("%w (message-id %q)", driver.ErrNacked, p.msgID))
		case p.ret != nil:
			pc.resolve(p, p.ret)
		default:
			pc.resolve(p, nil)
		}
		return
	}
}

func (pc *pubChan) resolve(p *pending, err error) {
	p.done <- err
	<-pc.s.c.sem
}

// shutdown fails the outstanding publishes of a dead channel and, when the
// connection lives on, installs a replacement channel.
func (pc *pubChan) shutdown() {
	pc.mu.Lock()
	pc.dead = true
	pc.mu.Unlock()
	var reason *amqp.Error
	select {
	case reason = <-pc.closes:
	default:
	}
	pc.qmu.Lock()
	var failed []*pending
	for pc.q.n > 0 {
		failed = append(failed, pc.q.popFront())
	}
	clear(pc.byID)
	pc.qmu.Unlock()
	c := pc.s.c
	if reason != nil && reason.Code == amqp.NotFound {
		// An exchange was deleted behind our back: check it again next time.
		if _, rest, ok := strings.Cut(reason.Reason, "no exchange '"); ok {
			if name, _, ok := strings.Cut(rest, "'"); ok {
				c.exchanges.Delete(name)
			}
		}
	}
	for _, p := range failed {
		pc.resolve(p, lostError(p, reason, c.isClosing()))
	}
	pc.replace()
	close(pc.gone)
}

func lostError(p *pending, reason *amqp.Error, closing bool) error {
	if reason != nil && reason.Code == amqp.NotFound && p.exchange != "" &&
		strings.Contains(reason.Reason, "no exchange '"+p.exchange+"'") {
		return fmt.Errorf("the exchange %q does not exist (%s): %w", p.exchange, reason.Reason, driver.ErrNotFound)
	}
	if closing {
		return fmt.Errorf("%w: %w", driver.ErrClosed, driver.ErrLost)
	}
	if reason != nil {
		return fmt.Errorf("%w (%s)", driver.ErrLost, reason.Reason)
	}
	return driver.ErrLost
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

// pick returns the slot a publish goes through.
func (s *session) pick(confirm bool) *slot {
	if !confirm {
		return s.rawSlot
	}
	if len(s.confirmSlots) == 1 {
		return s.confirmSlots[0]
	}
	return s.confirmSlots[int(s.rr.Add(1))%len(s.confirmSlots)]
}

// acquire takes a publish permit, waiting up to ConfirmTimeout.
func (c *conn) acquire(ctx context.Context) error {
	select {
	case c.sem <- struct{}{}:
		return nil
	default:
	}
	t := time.NewTimer(c.cfg.ConfirmTimeout)
	defer t.Stop()
	select {
	case c.sem <- struct{}{}:
		return nil
	case <-t.C:
		return fmt.Errorf("%d publishes are already waiting for a confirm and none completed within %s: %w",
			len(c.sem), c.cfg.ConfirmTimeout, driver.ErrConfirmTimeout)
	case <-ctx.Done():
		return fmt.Errorf("waiting for a permit to publish: %w", ctx.Err())
	case <-c.closing:
		return driver.ErrClosed
	}
}

// start publishes m and, with confirms, returns the pending to wait on.
func (c *conn) start(ctx context.Context, m *driver.Message) (*pending, error) {
	confirm := !c.cfg.NoConfirms || m.Mandatory
	headers, err := toAMQPTable(m.Headers)
	if err != nil {
		return nil, fmt.Errorf("acemq: the headers cannot be sent: %w", err)
	}
	pub := amqp.Publishing{
		Headers:       headers,
		ContentType:   m.ContentType,
		DeliveryMode:  amqp.Persistent,
		CorrelationId: m.CorrelationID,
		ReplyTo:       m.ReplyTo,
		Expiration:    m.Expiration,
		MessageId:     m.MessageID,
		Body:          m.Body,
	}
	if m.Transient {
		pub.DeliveryMode = amqp.Transient
	}
	if r := c.blocked.Load(); r != nil {
		return nil, blockedError(*r)
	}
	if err := c.checkExchange(ctx, m.Exchange); err != nil {
		return nil, err
	}
	for {
		if r := c.blocked.Load(); r != nil {
			return nil, blockedError(*r)
		}
		s, err := c.waitSession(ctx, nil)
		if err != nil {
			return nil, err
		}
		pc := s.pick(confirm).get()
		if confirm {
			if err := c.acquire(ctx); err != nil {
				return nil, err
			}
		}
		p, err := pc.send(ctx, m, &pub)
		if err == nil {
			return p, nil
		}
		if confirm {
			<-c.sem
		}
		if err != errGone {
			return nil, err
		}
		select {
		case <-pc.gone:
		case <-s.dead:
		case <-ctx.Done():
			return nil, ctx.Err()
		case <-c.closing:
			return nil, driver.ErrClosed
		}
	}
}

// wait waits for p's confirm, up to ConfirmTimeout and within ctx.
func (c *conn) wait(ctx context.Context, p *pending) error {
	select {
	case err := <-p.done:
		putPending(p)
		return err
	default:
	}
	if p.timer == nil {
		p.timer = time.NewTimer(c.cfg.ConfirmTimeout)
	} else {
		p.timer.Reset(c.cfg.ConfirmTimeout)
	}
	select {
	case err := <-p.done:
		p.timer.Stop()
		putPending(p)
		return err
	case <-p.timer.C:
		return fmt.Errorf("no confirm for the publish arrived within %s; it may or may not have been delivered: %w",
			c.cfg.ConfirmTimeout, driver.ErrConfirmTimeout)
	case <-ctx.Done():
		p.timer.Stop()
		return fmt.Errorf("waiting for the broker's confirm (the message may or may not have been delivered): %w", ctx.Err())
	}
}

// Publish sends m and, with confirms, waits for the broker's confirm. See
// driver.Conn and the package documentation.
func (c *conn) Publish(ctx context.Context, m driver.Message) error {
	p, err := c.start(ctx, &m)
	if err != nil || p == nil {
		return err
	}
	return c.wait(ctx, p)
}

// PublishBatch publishes every message, then awaits every confirm; the
// errors are in the order of ms, nil for a confirmed message.
func (c *conn) PublishBatch(ctx context.Context, ms []driver.Message) []error {
	errs := make([]error, len(ms))
	ps := make([]*pending, len(ms))
	for i := range ms {
		ps[i], errs[i] = c.start(ctx, &ms[i])
	}
	for i, p := range ps {
		if p != nil {
			errs[i] = c.wait(ctx, p)
		}
	}
	return errs
}

// checkExchange makes sure a publish does not name a missing exchange: the
// broker would close the publishing channel, and every other publish
// outstanding on it would be lost. Exchanges this connection declared,
// inspected or published to before are known; others are checked once with
// a passive declaration.
func (c *conn) checkExchange(ctx context.Context, name string) error {
	if name == "" || strings.HasPrefix(name, "amq.") {
		return nil
	}
	if _, ok := c.exchanges.Load(name); ok {
		return nil
	}
	return c.InspectExchange(ctx, name)
}
