package rabbitmq

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"slices"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/internal/testenv"
)

// brokerModel is what a broker's channel knows of its deliveries: those not
// yet settled. It checks every frame against what the engine settled.
type brokerModel struct {
	t        testing.TB
	open     map[uint64]bool // delivered, not settled on the wire
	acked    map[uint64]bool // acked by the engine
	released map[uint64]bool // acked on the wire
}

func newBrokerModel(t testing.TB, n uint64) *brokerModel {
	m := &brokerModel{t: t, open: map[uint64]bool{}, acked: map[uint64]bool{}, released: map[uint64]bool{}}
	for tag := uint64(1); tag <= n; tag++ {
		m.open[tag] = true
	}
	return m
}

// frame applies a basic.ack as the broker would, failing the test when it
// covers a delivery the engine has not acked or one already settled.
func (m *brokerModel) frame(f ackFrame) {
	m.t.Helper()
	if !f.multiple {
		if !m.open[f.tag] {
			m.t.Fatalf("ack of %d, which the broker no longer holds (unknown delivery tag: the channel would close)", f.tag)
		}
		m.release(f.tag)
		return
	}
	if !m.open[f.tag] {
		// RabbitMQ looks for the tag itself among those it holds.
		m.t.Fatalf("ack of up to %d, which the broker no longer holds (unknown delivery tag: the channel would close)", f.tag)
	}
	covered := 0
	for tag := range m.open {
		if tag <= f.tag {
			m.release(tag)
			covered++
		}
	}
	if covered == 0 {
		m.t.Fatalf("ack of up to %d covers nothing", f.tag)
	}
}

func (m *brokerModel) release(tag uint64) {
	m.t.Helper()
	if !m.acked[tag] {
		m.t.Fatalf("delivery %d was acked on the wire but the engine did not ack it", tag)
	}
	delete(m.open, tag)
	m.released[tag] = true
}

// nack settles tag on the wire as a nack or reject does.
func (m *brokerModel) nack(tag uint64) {
	m.t.Helper()
	if !m.open[tag] {
		m.t.Fatalf("nack of %d, which the broker no longer holds", tag)
	}
	delete(m.open, tag)
}

func frames(fs ...ackFrame) []ackFrame { return fs }

func TestAckBatchRunIsOneFrame(t *testing.T) {
	b := newAckBatch(4)
	for tag := uint64(1); tag <= 3; tag++ {
		if !b.ack(tag) {
			t.Fatalf("ack %d was not held back", tag)
		}
		if b.full() {
			t.Fatalf("full after %d acks of 4", tag)
		}
	}
	if !b.ack(4) || !b.full() {
		t.Fatal("not full after 4 acks of 4")
	}
	if got := b.flush(false, nil); !slices.Equal(got, frames(ackFrame{4, true})) {
		t.Fatalf("flush = %v, want one ack of up to 4", got)
	}
	if b.waiting() || b.base != 4 {
		t.Fatalf("after the flush: waiting %v, base %d", b.waiting(), b.base)
	}
	if got := b.flush(true, nil); len(got) != 0 {
		t.Fatalf("a flush with nothing waiting sent %v", got)
	}
}

func TestAckBatchGapHoldsLaterAcks(t *testing.T) {
	b := newAckBatch(10)
	for _, tag := range []uint64{1, 2, 4, 5} { // 3 is still being handled
		b.ack(tag)
	}
	if got := b.flush(false, nil); !slices.Equal(got, frames(ackFrame{2, true})) {
		t.Fatalf("flush = %v, want an ack of up to 2 only (3 is not settled)", got)
	}
	if !b.waiting() {
		t.Fatal("4 and 5 should still wait for 3")
	}
	b.ack(3)
	if got := b.flush(false, nil); !slices.Equal(got, frames(ackFrame{5, true})) {
		t.Fatalf("flush = %v, want an ack of up to 5 once 3 is acked", got)
	}
}

func TestAckBatchFlushAllSendsAfterTheGapOneByOne(t *testing.T) {
	b := newAckBatch(10)
	for _, tag := range []uint64{1, 3, 4} {
		b.ack(tag)
	}
	got := b.flush(true, nil)
	if want := frames(ackFrame{1, true}, ackFrame{3, false}, ackFrame{4, false}); !slices.Equal(got, want) {
		t.Fatalf("flush(all) = %v, want %v", got, want)
	}
	// 2 settles later: the run now covers 2 to 4, of which only 2 is
	// still held by the broker, and the frame names it (RabbitMQ refuses
	// a multiple ack of a tag it no longer holds).
	b.ack(2)
	if got := b.flush(true, nil); !slices.Equal(got, frames(ackFrame{2, true})) || b.base != 4 {
		t.Fatalf("flush = %v, base %d; want an ack of up to 2, base 4", got, b.base)
	}
}

func TestAckBatchNackInTheRun(t *testing.T) {
	b := newAckBatch(10)
	b.ack(1)
	b.sent(2) // nacked: settled on the wire on its own
	b.ack(3)
	if got := b.flush(true, nil); !slices.Equal(got, frames(ackFrame{3, true})) {
		t.Fatalf("flush = %v, want one ack of up to 3 (2 is no longer held)", got)
	}
	// A run of nothing but nacks sends no ack.
	b.sent(4)
	b.sent(5)
	b.ack(7)
	if got := b.flush(true, nil); !slices.Equal(got, frames(ackFrame{7, false})) {
		t.Fatalf("flush = %v, want a single ack of 7 (6 is open)", got)
	}
	if b.base != 5 {
		t.Fatalf("base = %d, want 5", b.base)
	}
}

func TestAckBatchFullOfAcksAfterAGap(t *testing.T) {
	// A slow handler holds 1 while the others settle 2 to 5: with as many
	// waiting as may, they go one by one rather than hold the broker's
	// window.
	b := newAckBatch(4)
	for tag := uint64(2); tag <= 5; tag++ {
		b.ack(tag)
	}
	if !b.full() {
		t.Fatal("not full")
	}
	got := b.flush(false, nil)
	if want := frames(ackFrame{2, false}, ackFrame{3, false}, ackFrame{4, false}, ackFrame{5, false}); !slices.Equal(got, want) {
		t.Fatalf("flush = %v, want %v", got, want)
	}
	b.ack(1)
	b.ack(6)
	if got := b.flush(true, nil); !slices.Equal(got, frames(ackFrame{6, true})) || b.base != 6 {
		t.Fatalf("flush = %v, base %d; want an ack of up to 6 once 1 settles, base 6", got, b.base)
	}
}

func TestAckBatchRefusesWhatCannotWait(t *testing.T) {
	b := newAckBatch(4)
	b.ack(1)
	if b.ack(1) {
		t.Fatal("a second ack of the same tag was held back")
	}
	b.flush(true, nil)
	if b.ack(1) {
		t.Fatal("an ack of a tag already sent was held back")
	}
	// A tag beyond the window turns coalescing off.
	if b.ack(ackWindow + 10) {
		t.Fatal("an ack beyond the window was held back")
	}
	if b.ack(2) {
		t.Fatal("coalescing is still on after the window overflowed")
	}
}

func TestAckBatchSize(t *testing.T) {
	for _, c := range []struct{ prefetch, want int }{
		{0, maxAckBatch}, {1, 1}, {10, 1}, {15, 1}, {16, 4}, {20, 5}, {200, 50}, {1 << 20, maxAckBatch},
	} {
		if got := ackBatchSize(c.prefetch); got != c.want {
			t.Errorf("ackBatchSize(%d) = %d, want %d", c.prefetch, got, c.want)
		}
	}
}

// TestAckBatchModel settles deliveries in random orders, some with a nack,
// flushing at random points and whenever the batch is full, and checks
// every frame against a model of the broker: no frame covers a delivery
// the engine did not ack, none acks a tag twice, no more acks wait than
// the batch holds, and a final flush leaves nothing acked unsent.
func TestAckBatchModel(t *testing.T) {
	for seed := uint64(1); seed <= 300; seed++ {
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 7))
			n := uint64(1 + r.IntN(300))
			size := 2 + r.IntN(20)
			m := newBrokerModel(t, n)
			b := newAckBatch(size)
			// Deliveries are handed up in order and settled by up to c
			// handlers at once, so out of order within about c.
			c := 1 + r.IntN(8)
			var inflight []uint64
			next := uint64(1)
			sent := 0
			apply := func(fs []ackFrame) {
				for _, f := range fs {
					m.frame(f)
				}
				sent += len(fs)
			}
			for next <= n || len(inflight) > 0 {
				for len(inflight) < c && next <= n {
					inflight = append(inflight, next)
					next++
				}
				i := r.IntN(len(inflight))
				if r.IntN(4) == 0 {
					i = 0 // the oldest, often
				}
				tag := inflight[i]
				inflight = slices.Delete(inflight, i, i+1)
				if r.IntN(10) == 0 {
					// A nack: what waits goes first, as the coalescer does.
					apply(b.flush(true, nil))
					b.sent(tag)
					m.nack(tag)
				} else {
					m.acked[tag] = true
					if !b.ack(tag) {
						t.Fatalf("ack of %d was not held back", tag)
					}
					if b.full() {
						apply(b.flush(false, nil))
					}
					if len(b.wait) >= size {
						t.Fatalf("%d acks wait after a flush, the batch is %d", len(b.wait), size)
					}
				}
				if r.IntN(20) == 0 {
					apply(b.flush(r.IntN(2) == 0, nil))
				}
			}
			apply(b.flush(true, nil))
			for tag := range m.acked {
				if !m.released[tag] {
					t.Fatalf("delivery %d was acked and never sent", tag)
				}
			}
			if len(m.open) != 0 {
				t.Fatalf("the broker still holds %d deliveries", len(m.open))
			}
			acks := len(m.acked)
			if c == 1 && size >= 4 && acks > 2*size && sent > acks/2 {
				t.Fatalf("%d frames for %d acks in order, batch %d: not coalesced", sent, acks, size)
			}
		})
	}
}

// recorder is a coalescer's send that records the frames.
type recorder struct {
	mu   sync.Mutex
	fs   []ackFrame
	fail error
	sent chan struct{}
}

func newRecorder() *recorder { return &recorder{sent: make(chan struct{}, 100)} }

func (r *recorder) send(tag uint64, multiple bool) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.fail != nil {
		return r.fail
	}
	r.fs = append(r.fs, ackFrame{tag, multiple})
	select {
	case r.sent <- struct{}{}:
	default:
	}
	return nil
}

func (r *recorder) frames() []ackFrame {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.fs)
}

// slowAcks makes the coalescers of a test wait for their timer for as
// long as the test runs, unless something else sends what waits.
func slowAcks(t *testing.T) {
	old := ackDelay
	ackDelay = time.Hour
	t.Cleanup(func() { ackDelay = old })
}

// busyCoalescer returns a coalescer of a busy subscription.
func busyCoalescer(size int, send func(uint64, bool) error) *coalescer {
	c := newCoalescer(size, send)
	c.busy.Store(true)
	return c
}

func TestCoalescerSendsAFullBatch(t *testing.T) {
	slowAcks(t)
	r := newRecorder()
	c := busyCoalescer(3, r.send)
	defer c.close()
	for tag := uint64(1); tag <= 2; tag++ {
		if err := c.ack(tag); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.frames(); len(got) != 0 || !c.pending.Load() {
		t.Fatalf("sent %v before the batch was full (pending %v)", got, c.pending.Load())
	}
	if err := c.ack(3); err != nil {
		t.Fatal(err)
	}
	if got := r.frames(); !slices.Equal(got, frames(ackFrame{3, true})) || c.pending.Load() {
		t.Fatalf("sent %v (pending %v), want one ack of up to 3", got, c.pending.Load())
	}
}

func TestCoalescerFlushesBeforeANack(t *testing.T) {
	slowAcks(t)
	r := newRecorder()
	c := busyCoalescer(10, r.send)
	defer c.close()
	_ = c.ack(1)
	_ = c.ack(3)
	err := c.settle(2, func() error { return r.send(2, false) }) // stands for the nack
	if err != nil {
		t.Fatal(err)
	}
	want := frames(ackFrame{1, true}, ackFrame{3, false}, ackFrame{2, false})
	if got := r.frames(); !slices.Equal(got, want) {
		t.Fatalf("sent %v, want the waiting acks, then the nack: %v", got, want)
	}
	_ = c.ack(4)
	if err := c.flush(); err != nil {
		t.Fatal(err)
	}
	if got := r.frames()[3:]; !slices.Equal(got, frames(ackFrame{4, true})) {
		t.Fatalf("then sent %v, want an ack of up to 4", got)
	}
}

func TestCoalescerClose(t *testing.T) {
	slowAcks(t)
	r := newRecorder()
	c := busyCoalescer(10, r.send)
	_ = c.ack(1)
	_ = c.ack(2)
	c.close()
	if got := r.frames(); !slices.Equal(got, frames(ackFrame{2, true})) {
		t.Fatalf("close sent %v, want an ack of up to 2", got)
	}
	// After close every ack goes at once.
	_ = c.ack(3)
	if got := r.frames()[1:]; !slices.Equal(got, frames(ackFrame{3, false})) {
		t.Fatalf("an ack after close sent %v", got)
	}
}

func TestCoalescerTimerSendsWhatWaits(t *testing.T) {
	old := ackDelay
	ackDelay = time.Millisecond
	t.Cleanup(func() { ackDelay = old })
	r := newRecorder()
	c := busyCoalescer(10, r.send)
	defer c.close()
	for round := range 3 { // the timer is armed again after each flush
		tag := uint64(round + 1)
		if err := c.ack(tag); err != nil {
			t.Fatal(err)
		}
		select {
		case <-r.sent:
		case <-time.After(testenv.Patience):
			t.Fatalf("round %d: the ack waiting was not sent by the timer", round)
		}
		if got := r.frames()[round]; got != (ackFrame{tag, true}) {
			t.Fatalf("round %d: the timer sent %v", round, got)
		}
	}
}

func TestCoalescerReportsASendFailure(t *testing.T) {
	slowAcks(t)
	r := newRecorder()
	c := busyCoalescer(2, r.send)
	defer c.close()
	_ = c.ack(1)
	r.fail = errors.New("channel closed")
	if err := c.ack(2); !errors.Is(err, r.fail) {
		t.Fatalf("the ack that filled the batch returned %v, want the send's error", err)
	}
	if err := c.settle(3, func() error { return nil }); err != nil {
		// Nothing waits (the failed frames are not sent again).
		t.Fatalf("settle after a failed flush: %v", err)
	}
}

// A subscription that is not busy sends each ack at once, and its window
// moves on with them (it does not grow with every ack).
func TestCoalescerIdleSendsAtOnce(t *testing.T) {
	slowAcks(t)
	r := newRecorder()
	c := newCoalescer(10, r.send)
	defer c.close()
	for tag := uint64(1); tag <= 3; tag++ {
		if err := c.ack(tag); err != nil {
			t.Fatal(err)
		}
	}
	if got := r.frames(); !slices.Equal(got, frames(ackFrame{1, false}, ackFrame{2, false}, ackFrame{3, false})) || c.pending.Load() {
		t.Fatalf("sent %v (pending %v), want each ack at once", got, c.pending.Load())
	}
	if c.b.base != 3 || len(c.b.win) != 0 {
		t.Fatalf("base %d, window %v: want base 3, an empty window", c.b.base, c.b.win)
	}
	// Busy: 5 waits for 4 (still being handled) and 6; once 4 is acked,
	// idle again, one frame covers 4 to 6.
	c.busy.Store(true)
	_ = c.ack(5)
	_ = c.ack(6)
	c.busy.Store(false)
	_ = c.ack(4)
	if got := r.frames()[3:]; !slices.Equal(got, frames(ackFrame{6, true})) {
		t.Fatalf("then sent %v, want one ack of up to 6", got)
	}
}
