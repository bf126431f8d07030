package rabbitmq

import (
	"sync/atomic"
	"time"
)

// confirmTicks is the number of clock periods in a confirm timeout: the
// connection's confirm clock ticks every ConfirmTimeout/confirmTicks.
const confirmTicks = 8

// confirmClock times the waits for confirms of one connection: one timer
// for all of them instead of one per publish. It ticks every period while
// anyone waits, and each tick closes the channel the waits watch; a wait
// that starts between ticks e and e+1 times out at tick e+confirmTicks+1,
// so after between one and 1+1/confirmTicks confirm timeouts.
//
// It needs no goroutine of its own: its timer runs tick, which re-arms it
// while there are waits, and the first wait after an idle spell arms it.
type confirmClock struct {
	period  time.Duration // 0: it ticks only when tick is called (tests)
	timer   *time.Timer
	armed   atomic.Bool
	waiting atomic.Int32
	now     atomic.Pointer[clockTick]
}

// clockTick is the clock between two ticks: their count so far, and the
// channel the next tick closes.
type clockTick struct {
	n    uint64
	next chan struct{}
}

// newConfirmClock returns the clock of waits of timeout; a timeout of 0
// makes a clock only tick moves.
func newConfirmClock(timeout time.Duration) *confirmClock {
	k := &confirmClock{period: timeout / confirmTicks}
	k.now.Store(&clockTick{next: make(chan struct{})})
	if k.period > 0 {
		k.timer = time.AfterFunc(k.period, k.tick)
		k.timer.Stop()
	}
	return k
}

// start begins a wait and returns the tick at which it times out. The
// caller calls end when the wait is over.
func (k *confirmClock) start() uint64 {
	k.waiting.Add(1)
	k.arm()
	return k.now.Load().n + confirmTicks + 1
}

// end ends a wait begun by start.
func (k *confirmClock) end() { k.waiting.Add(-1) }

// arm starts the timer unless it runs.
func (k *confirmClock) arm() {
	if k.timer != nil && !k.armed.Load() && k.armed.CompareAndSwap(false, true) {
		k.timer.Reset(k.period)
	}
}

// at is the clock now: the ticks so far and the channel the next closes.
func (k *confirmClock) at() *clockTick { return k.now.Load() }

// tick moves the clock on, waking every wait, and re-arms the timer while
// anyone waits.
func (k *confirmClock) tick() {
	for {
		cur := k.now.Load()
		if k.now.CompareAndSwap(cur, &clockTick{n: cur.n + 1, next: make(chan struct{})}) {
			close(cur.next)
			break
		}
	}
	if k.timer == nil {
		return
	}
	if k.waiting.Load() > 0 {
		k.timer.Reset(k.period)
		return
	}
	k.armed.Store(false)
	// A wait that started after the load above saw the timer armed and
	// left it: arm it for that wait.
	if k.waiting.Load() > 0 {
		k.arm()
	}
}
