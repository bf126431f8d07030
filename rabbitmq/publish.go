package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"iter"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/fifo"
	amqp "github.com/rabbitmq/amqp091-go"
)

// A publish goes through one pubChan: an amqp091 channel (in confirm mode
// unless confirms are off) and a watcher goroutine that notices when the
// channel dies and opens a replacement. Each publish waits for its own
// amqp091 deferred confirmation, which the connection's reader goroutine
// resolves directly, so the confirm path adds no goroutine hand-off and no
// lock to the raw client's.
//
// Returns: RabbitMQ sends basic.return before the basic.ack of the same
// publish on the same channel, and amqp091's reader hands the return to
// the channel's buffered return listener before it resolves the ack. So
// when a mandatory publish sees its ack, its return (if any) is already in
// that buffer or was taken out by another publisher; publishers drain the
// buffer under qmu, recording each return on the oldest outstanding
// publish with its message-id and destination, and then read their own.

// pending is one publish awaiting its confirm. Pendings are pooled.
type pending struct {
	pc         *pubChan
	dc         *amqp.DeferredConfirmation
	mandatory  bool
	msgID      string
	exchange   string
	routingKey string
	ret        *driver.ReturnError // recorded from a basic.return, under qmu
	// held is true while the publish holds a permit of c.permits. Whoever
	// gives the permit back swaps it to false first: the publish's own
	// finish, the sweep of abandoned publishes, or a reclaim.
	held atomic.Bool
	// prev and next link the outstanding mandatory publishes of pc, oldest
	// first, under pc.qmu.
	prev, next *pending
}

var pendingPool = sync.Pool{New: func() any { return new(pending) }}

func getPending() *pending { return pendingPool.Get().(*pending) }

func putPending(p *pending) {
	p.held.Store(false)
	p.pc, p.dc, p.ret, p.prev, p.next = nil, nil, nil, nil, nil
	p.msgID, p.exchange, p.routingKey = "", "", ""
	pendingPool.Put(p)
}

// errGone: the channel died before the message was written; the publish
// can be retried on another channel.
var errGone = errors.New("publishing channel gone")

// tracked reports whether a return can be matched to p.
func (p *pending) tracked() bool { return p.mandatory && p.msgID != "" }

// finish turns p's resolved confirmation into the publish's result and
// gives back its permit.
func (c *conn) finish(p *pending) error {
	pc := p.pc
	acked := p.dc.Acked()
	var err error
	if p.mandatory {
		pc.qmu.Lock()
		pc.drainReturns()
		if p.tracked() {
			if acked && p.ret != nil {
				err = p.ret
			}
			pc.unlink(p)
		}
		pc.qmu.Unlock()
	}
	if !acked {
		if pc.ch.IsClosed() {
			// amqp091 resolves the confirmations of a closing channel as
			// nacks: those publishes were lost, not refused.
			<-pc.closed
			err = lostError(p, pc.reason.Load(), c.isClosing())
		} else {
			err = fmt.Errorf("rabbitmq: %w (message-id %q)", driver.ErrNacked, p.msgID)
		}
	}
	p.release(c)
	if c.abandonedN.Load() > 0 {
		c.sweep()
	}
	return err
}

// release gives back p's permit, unless it was given back already.
func (p *pending) release(c *conn) {
	if p.held.Swap(false) {
		c.permits.release()
	}
}

// abandon records a publish whose caller stopped waiting: it keeps its
// permit until its confirmation arrives, and sweep then gives it back.
func (c *conn) abandon(p *pending) {
	c.abMu.Lock()
	c.abandoned = append(c.abandoned, p)
	c.abandonedN.Store(int32(len(c.abandoned)))
	c.abMu.Unlock()
}

// sweep gives back the permits of abandoned publishes that are resolved.
func (c *conn) sweep() {
	c.abMu.Lock()
	defer c.abMu.Unlock()
	keep := c.abandoned[:0]
	for _, p := range c.abandoned {
		select {
		case <-p.dc.Done():
			if p.mandatory {
				p.pc.qmu.Lock()
				p.pc.drainReturns()
				if p.tracked() {
					p.pc.unlink(p)
				}
				p.pc.qmu.Unlock()
			}
			p.release(c)
		default:
			keep = append(keep, p)
		}
	}
	clear(c.abandoned[len(keep):])
	c.abandoned = keep
	c.abandonedN.Store(int32(len(keep)))
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
	if c.permits.tryAcquire() {
		return nil
	}
	if c.lentN.Load() > 0 && c.reclaim() && c.permits.tryAcquire() {
		return nil
	}
	c.permits.wait()
	defer c.permits.done()
	if c.permits.tryAcquire() {
		return nil
	}
	t := time.NewTimer(c.cfg.ConfirmTimeout)
	defer t.Stop()
	// Abandoned publishes give their permits back when their confirms
	// arrive; nobody is waiting on them, so look now and then.
	tick := time.NewTicker(10 * time.Millisecond)
	defer tick.Stop()
	for {
		select {
		case <-c.permits.freed:
		case <-tick.C:
			if c.abandonedN.Load() > 0 {
				c.sweep()
			}
			if c.lentN.Load() > 0 {
				c.reclaim()
			}
		case <-t.C:
			return fmt.Errorf("%d publishes are already waiting for a confirm and none completed within %s: %w",
				c.permits.held(), c.cfg.ConfirmTimeout, driver.ErrConfirmTimeout)
		case <-ctx.Done():
			return fmt.Errorf("rabbitmq: waiting for a permit to publish: %w", ctx.Err())
		case <-c.closing:
			return driver.ErrClosed
		}
		if c.permits.tryAcquire() {
			return nil
		}
	}
}

// start publishes m and, with confirms, returns the pending to wait on.
func (c *conn) start(ctx context.Context, m *driver.Message) (*pending, error) {
	confirm := !c.cfg.NoConfirms || m.Mandatory
	// One walk over the headers for the common flat table; anything else
	// is converted and measured the long way.
	var headers amqp.Table
	var headerSize int
	flat := m.HeaderSize > 0 && len(m.Headers) <= maxContainerElements
	if flat {
		// The producer added the size up as it wrote the headers (see
		// driver.Message.HeaderSize): no walk here.
		headers, headerSize = amqp.Table(m.Headers), m.HeaderSize
	} else {
		headers, headerSize, flat = flatTable(m.Headers)
	}
	if !flat {
		var err error
		if headers, err = toAMQPTable(m.Headers); err != nil {
			return nil, fmt.Errorf("rabbitmq: the headers cannot be sent: %w", err)
		}
		headerSize = -1
	}
	pub := amqp.Publishing{
		Headers:       headers,
		ContentType:   m.ContentType,
		DeliveryMode:  amqp.Persistent,
		CorrelationId: m.CorrelationID,
		ReplyTo:       m.ReplyTo,
		Expiration:    m.Expiration,
		Priority:      m.Priority,
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
		// Refuse what would close the connection (and lose every publish
		// outstanding on it) rather than send it.
		if err := checkSendableSized(&pub, s.ac.Config.FrameSize, headerSize); err != nil {
			return nil, fmt.Errorf("rabbitmq: nothing was published: %w", err)
		}
		pc := s.pick(confirm).get()
		if confirm {
			if err := c.acquire(ctx); err != nil {
				return nil, err
			}
		}
		p, err := pc.send(ctx, m, &pub)
		if err == nil {
			if p != nil {
				p.held.Store(true)
			}
			return p, nil
		}
		if confirm {
			c.permits.release()
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

// wait waits for p's confirm, up to ConfirmTimeout (as the connection's
// confirm clock counts it) and within ctx.
func (c *conn) wait(ctx context.Context, p *pending) error {
	done := p.dc.Done()
	select {
	case <-done:
		err := c.finish(p)
		putPending(p)
		return err
	default:
	}
	k := c.clock
	deadline := k.start()
	defer k.end()
	for {
		now := k.at()
		if now.n >= deadline {
			c.abandon(p)
			return fmt.Errorf("rabbitmq: no confirm for the publish arrived within %s; it may or may not have been delivered: %w",
				c.cfg.ConfirmTimeout, driver.ErrConfirmTimeout)
		}
		select {
		case <-done:
			err := c.finish(p)
			putPending(p)
			return err
		case <-now.next:
		case <-ctx.Done():
			c.abandon(p)
			return fmt.Errorf("rabbitmq: waiting for the broker's confirm (the message may or may not have been delivered): %w", ctx.Err())
		}
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
// errors are in the order of ms, nil for a confirmed message. It is
// PublishEach over ms.
func (c *conn) PublishBatch(ctx context.Context, ms []driver.Message) []error {
	errs := make([]error, 0, len(ms))
	c.PublishEach(ctx, func(yield func(*driver.Message, error) bool) {
		for i := range ms {
			if !yield(&ms[i], nil) {
				return
			}
		}
	}, func(err error) { errs = append(errs, err) })
	// PublishEach stops taking messages when ctx ends.
	for len(errs) < len(ms) {
		errs = append(errs, fmt.Errorf("rabbitmq: nothing was published: %w", ctx.Err()))
	}
	return errs
}

// PublishEach publishes each message ms yields and reports each result, in
// order, as its confirm arrives (driver.EachPublisher).
//
// The call's own publishes wait in a queue, oldest first, until their
// results are reported. Before each publish it reports every result at the
// front that is known, and while every permit (MaxOutstanding) is taken it
// awaits its oldest publish: a permit it waited for otherwise would come
// back only from its own confirms, which nobody is awaiting. So the window
// slides inside the call, however long ms is.
//
// A result is reported only when ms yields again, but a permit should not
// wait for that: while ms waits, the call's confirmed publishes would hold
// permits every other publish of the connection needs. So the queue is lent
// to the connection for the call, and a publish short of a permit takes
// back those of confirmed, unreported publishes (reclaim); their results
// are still reported in order.
//
// When ms or done panics, the publishes not yet reported are abandoned
// (their permits come back as their confirms arrive), so the connection is
// not left short of permits, and the panic goes on.
func (c *conn) PublishEach(ctx context.Context, ms iter.Seq2[*driver.Message, error], done func(error)) {
	q := new(eachQueue)
	c.lend(q)
	defer func() {
		c.unlend(q)
		for q.Len() > 0 { // only after a panic
			if e := q.pop(); e.p != nil {
				c.abandon(e.p)
			}
		}
	}()
	for m, err := range ms {
		q.reportKnown(ctx, c, done)
		stop := false
		if err == nil && ctx.Err() != nil {
			err, stop = fmt.Errorf("rabbitmq: nothing was published: %w", ctx.Err()), true
		}
		if err != nil {
			q.push(nil, err)
			if stop {
				break
			}
			continue
		}
		p, err := c.start(ctx, m)
		q.push(p, err)
	}
	for q.Len() > 0 {
		e := q.pop()
		if e.p != nil {
			e.err = c.wait(ctx, e.p)
		}
		done(e.err)
	}
}

// eachEntry is one message of a PublishEach: the publish awaiting its
// confirm, or (p nil) its result.
type eachEntry struct {
	p   *pending
	err error
}

// eachQueue is a PublishEach's messages whose results are not yet
// reported, oldest first. Only its PublishEach changes it, under mu; a
// reclaim reads it under mu.
type eachQueue struct {
	mu sync.Mutex
	fifo.Queue[eachEntry]
}

func (q *eachQueue) push(p *pending, err error) {
	q.mu.Lock()
	q.Push(eachEntry{p, err})
	q.mu.Unlock()
}

// pop takes the oldest entry out of q: once out, no reclaim sees its
// publish, which its PublishEach then awaits and recycles.
func (q *eachQueue) pop() eachEntry {
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.Pop()
}

// lend makes q's publishes reclaimable until unlend.
func (c *conn) lend(q *eachQueue) {
	c.lentMu.Lock()
	if c.lent == nil {
		c.lent = map[*eachQueue]struct{}{}
	}
	c.lent[q] = struct{}{}
	c.lentN.Store(int32(len(c.lent)))
	c.lentMu.Unlock()
}

func (c *conn) unlend(q *eachQueue) {
	c.lentMu.Lock()
	delete(c.lent, q)
	c.lentN.Store(int32(len(c.lent)))
	c.lentMu.Unlock()
}

// reclaim gives back the permits of the lent publishes whose confirms have
// arrived, and reports whether it gave any back. Their PublishEach still
// reports their results, in order.
func (c *conn) reclaim() bool {
	gave := false
	c.lentMu.Lock()
	defer c.lentMu.Unlock()
	for q := range c.lent {
		q.mu.Lock()
		for i := range q.Len() {
			if p := q.At(i).p; p != nil && p.resolved() && p.held.Load() {
				p.release(c)
				gave = true
			}
		}
		q.mu.Unlock()
	}
	return gave
}

// reportKnown reports the results at the front of q that are known, and
// while every permit of c is taken awaits the oldest publish.
func (q *eachQueue) reportKnown(ctx context.Context, c *conn, done func(error)) {
	for q.Len() > 0 {
		if p := q.Front().p; p != nil && !c.permits.full() && !p.resolved() {
			return
		}
		// Out of the queue before it is awaited: wait recycles the
		// pending, which a reclaim must not see after that.
		e := q.pop()
		if e.p != nil {
			e.err = c.wait(ctx, e.p)
		}
		done(e.err)
	}
}

// resolved reports whether p's confirm has arrived.
func (p *pending) resolved() bool {
	select {
	case <-p.dc.Done():
		return true
	default:
		return false
	}
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
