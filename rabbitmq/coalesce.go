package rabbitmq

import (
	"sync"
	"sync/atomic"
	"time"
)

// Acknowledgements of a subscription's deliveries are sent together: one
// basic.ack with multiple set covers a run of delivery tags, where a hand
// client sends one basic.ack per message. The run is only ever made of tags
// the engine has settled: every tag from the last one sent up to the top of
// the run was acked (and is waiting) or was already settled on the wire (a
// nack, a reject, a single ack). A tag handed up and not yet settled ends
// the run, and tags acked after it wait for it or are sent one by one.
//
// What waits is sent:
//   - when ackBatchSize(prefetch) acks wait (a quarter of the prefetch, so
//     the broker's window stays open);
//   - ackDelay after the first of them was recorded;
//   - when the subscription has no further delivery to hand up (an idle
//     consumer sends its last ack at once, see subscription.Receive);
//   - before a nack or reject on the channel, and when the subscription is
//     cancelled or closed or its connection is closed.
//
// An ack still waiting when the channel or connection is lost is not sent,
// and the broker redelivers its message (marked redelivered), as it does
// with an ack written to the socket just before a connection is lost: in
// both cases the settlement reported success, and at-least-once delivery
// holds. Coalescing widens that window from a round trip to at most
// ackDelay or ackBatchSize acks. An Ack on a channel already known to be
// gone still fails at once, as without coalescing.

// ackDelay bounds how long an ack waits before it is sent. A variable so
// that tests can change it.
var ackDelay = 20 * time.Millisecond

// maxAckBatch bounds the acks that wait at once whatever the prefetch, and
// is the batch of a subscription without a prefetch.
const maxAckBatch = 256

// ackWindow bounds the tags a coalescer tracks after the last one sent: a
// delivery left unsettled while that many later ones are settled turns
// coalescing off for its channel, which then sends every settlement at
// once.
const ackWindow = 1 << 16

// ackBatchSize is how many acks wait at most on a subscription with the
// prefetch: a quarter of it, so that three quarters of the broker's window
// stay open; 1 (no coalescing) below a prefetch of 16, where a batch of at
// most 3 saves less than holding it back costs.
func ackBatchSize(prefetch int) int {
	switch {
	case prefetch <= 0:
		return maxAckBatch
	case prefetch < 16:
		return 1
	}
	return min(prefetch/4, maxAckBatch)
}

// The state of a delivery tag in an ackBatch's window.
const (
	tagOpen    uint8 = iota // not settled (or never handed up)
	tagWaiting              // acked, its basic.ack not yet sent
	tagSent                 // settled on the wire: nack, reject or a single ack
)

// ackFrame is a basic.ack to send.
type ackFrame struct {
	tag      uint64
	multiple bool
}

// ackBatch is the bookkeeping of coalesced acks on one channel, without
// locking or I/O: it says which frames to send.
type ackBatch struct {
	size int    // acks that may wait at once
	base uint64 // every tag up to base is settled on the wire (or not ours)
	win  []uint8
	buf  []uint8  // win's backing array, to move win back to its start
	wait []uint64 // the waiting acks, in the order recorded
	off  bool     // the window overflowed: nothing is coalesced any more
}

func newAckBatch(size int) *ackBatch {
	return &ackBatch{size: size}
}

// state returns the state of tag's slot, growing the window to hold it, or
// nil when tag is at or below base or beyond the window.
func (b *ackBatch) state(tag uint64) *uint8 {
	if tag <= b.base {
		return nil
	}
	i := tag - b.base - 1
	if i >= ackWindow {
		return nil
	}
	for uint64(len(b.win)) <= i {
		if len(b.win) == cap(b.win) && cap(b.buf) > 0 && len(b.win) < cap(b.buf)/2 {
			// Move the window back to the start of its array rather
			// than grow it.
			n := copy(b.buf, b.win)
			b.win = b.buf[:n]
			continue
		}
		b.win = append(b.win, tagOpen)
		if cap(b.win) > cap(b.buf) {
			b.buf = b.win[:cap(b.win)]
		}
	}
	return &b.win[i]
}

// ack records an ack of tag. It returns false when the ack cannot wait and
// must be sent at once: coalescing is off, the tag was already settled, or
// it lies beyond the window (which turns coalescing off).
func (b *ackBatch) ack(tag uint64) bool {
	if b.off {
		return false
	}
	p := b.state(tag)
	if p == nil {
		if tag > b.base {
			b.off = true
		}
		return false
	}
	if *p != tagOpen {
		return false
	}
	*p = tagWaiting
	b.wait = append(b.wait, tag)
	return true
}

// sent records that tag was settled on the wire on its own (a nack, a
// reject, or an ack that did not wait), so that a run may cover it.
func (b *ackBatch) sent(tag uint64) {
	if b.off {
		return
	}
	p := b.state(tag)
	if p == nil {
		b.off = b.off || tag > b.base // beyond the window
		return
	}
	if *p == tagOpen {
		*p = tagSent
	}
	// Settled tags at the front need no frame: move past them.
	n := 0
	for n < len(b.win) && b.win[n] == tagSent {
		n++
	}
	if n > 0 {
		b.base += uint64(n)
		b.win = b.win[n:]
	}
}

// full reports whether as many acks wait as may.
func (b *ackBatch) full() bool { return len(b.wait) >= b.size }

// waiting reports whether any ack waits.
func (b *ackBatch) waiting() bool { return len(b.wait) > 0 }

// flush appends to out the frames that send the waiting acks and records
// them as sent: one basic.ack with multiple for the run of settled tags
// after base, naming its last waiting ack, if it holds one, and a single basic.ack for each
// waiting ack after the run when all is set or when as many of them wait
// as may (the run is held up by a delivery still being handled). Without
// all, acks after the run otherwise keep waiting for it to fill.
func (b *ackBatch) flush(all bool, out []ackFrame) []ackFrame {
	if len(b.wait) == 0 {
		return out
	}
	// The frame names the last waiting tag of the run: RabbitMQ refuses a
	// multiple ack whose tag it no longer holds (unknown delivery tag),
	// and tags after it in the run are settled already.
	n, top := 0, uint64(0)
	for n < len(b.win) && b.win[n] != tagOpen {
		if b.win[n] == tagWaiting {
			top = b.base + uint64(n) + 1
		}
		n++
	}
	if n > 0 {
		b.base += uint64(n)
		b.win = b.win[n:]
		if top > 0 {
			out = append(out, ackFrame{tag: top, multiple: true})
		}
	}
	rest := b.wait[:0]
	for _, t := range b.wait {
		if t > b.base {
			rest = append(rest, t)
		}
	}
	b.wait = rest
	if len(rest) == 0 || (!all && len(rest) < b.size) {
		return out
	}
	for _, t := range rest {
		out = append(out, ackFrame{tag: t})
		b.win[t-b.base-1] = tagSent
	}
	b.wait = b.wait[:0]
	return out
}

// coalescer holds back the acks of one subscription's channel and sends
// them together (see ackBatch), while the subscription is busy: while
// deliveries keep arriving. An idle subscription (one that found nothing
// waiting, a request/reply responder, say) has nothing to send an ack
// with, and sends each at once. It is safe for concurrent use.
type coalescer struct {
	mu     sync.Mutex
	b      *ackBatch
	send   func(tag uint64, multiple bool) error
	timer  *time.Timer
	armed  bool
	closed bool // flushed for the last time: settlements go out at once
	frames []ackFrame

	// pending is whether acks wait, read without the lock by Receive
	// before it parks.
	pending atomic.Bool
	// busy is set when a delivery was found waiting, or came to a reader
	// that waited while other readers took deliveries, and cleared when
	// none was waiting (subscription.Receive); acks wait only while it is
	// set.
	busy atomic.Bool
	// handed counts the deliveries handed up (subscription.Receive): a
	// reader compares it before and after it waits.
	handed atomic.Uint64
}

func newCoalescer(size int, send func(tag uint64, multiple bool) error) *coalescer {
	return &coalescer{b: newAckBatch(size), send: send}
}

// ack acknowledges tag: it waits with the others, or is sent with them
// when the batch is full, or at once when it cannot wait.
func (c *coalescer) ack(tag uint64) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closed {
		return c.send(tag, false)
	}
	if !c.busy.Load() && !c.b.waiting() {
		c.b.sent(tag)
		return c.send(tag, false)
	}
	if !c.b.ack(tag) {
		err := c.flushLocked(true) // the window may have just overflowed
		if err == nil {
			err = c.send(tag, false)
		}
		return err
	}
	if !c.busy.Load() {
		// Not busy any more: this one and those that waited go now.
		return c.flushLocked(true)
	}
	if c.b.full() {
		if err := c.flushLocked(false); err != nil || !c.b.waiting() {
			return err
		}
	}
	c.pending.Store(true)
	if !c.armed {
		c.armed = true
		if c.timer == nil {
			c.timer = time.AfterFunc(ackDelay, c.expire)
		} else {
			c.timer.Reset(ackDelay)
		}
	}
	return nil
}

// settle sends every waiting ack, then runs send, the nack or reject of
// tag, and records tag as settled.
func (c *coalescer) settle(tag uint64, send func() error) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if err := c.flushLocked(true); err != nil {
		return err
	}
	c.b.sent(tag)
	return send()
}

// flush sends every waiting ack.
func (c *coalescer) flush() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.flushLocked(true)
}

// close sends every waiting ack; settlements from then on are sent at
// once.
func (c *coalescer) close() {
	c.mu.Lock()
	defer c.mu.Unlock()
	_ = c.flushLocked(true)
	c.closed = true
}

func (c *coalescer) expire() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.armed = false
	_ = c.flushLocked(true)
}

// flushLocked sends what flush says (all: every waiting ack) and stops the
// timer once nothing waits. It stops at the first frame that fails.
func (c *coalescer) flushLocked(all bool) error {
	c.frames = c.b.flush(all, c.frames[:0])
	var err error
	for _, f := range c.frames {
		if err = c.send(f.tag, f.multiple); err != nil {
			break
		}
	}
	if !c.b.waiting() {
		c.pending.Store(false)
		if c.armed && c.timer.Stop() {
			c.armed = false
		}
	}
	return err
}
