package rabbitmq

import "sync/atomic"

// permits bounds the publishes awaiting a confirm (MaxOutstanding): a
// count of the permits taken and a signal for publishes waiting for one.
// Taking and giving back a permit is an atomic operation; the signal is
// sent only while someone waits.
//
// A waiter counts itself in waiting before it tries for a permit, and a
// release gives its permit back before it looks at waiting, so either the
// waiter's try sees the permit or the release sees the waiter and signals.
// The signal holds one token: a waiter that takes a permit and sees more
// free while others wait passes the token on, and so does one that gives
// up, so a release is never lost to a dropped token.
type permits struct {
	max     int32
	taken   atomic.Int32
	waiting atomic.Int32
	freed   chan struct{} // a permit was given back while someone waited
}

func newPermits(max int) *permits {
	return &permits{max: int32(max), freed: make(chan struct{}, 1)}
}

// tryAcquire takes a permit if one is free.
func (p *permits) tryAcquire() bool {
	for {
		n := p.taken.Load()
		if n >= p.max {
			return false
		}
		if p.taken.CompareAndSwap(n, n+1) {
			return true
		}
	}
}

// release gives a permit back, waking a waiter if there is one.
func (p *permits) release() {
	p.taken.Add(-1)
	if p.waiting.Load() > 0 {
		p.signal()
	}
}

func (p *permits) signal() {
	select {
	case p.freed <- struct{}{}:
	default:
	}
}

// wait counts the caller as waiting for a permit until done is called.
// Between the two it calls tryAcquire and, when that fails, waits on
// freed (or anything else it waits for) before trying again.
func (p *permits) wait() { p.waiting.Add(1) }

// done ends a wait: the caller stops waiting, with a permit or without. If
// others still wait and a permit is free, it passes the signal on: the
// token it was woken by may have stood for more than its own permit.
func (p *permits) done() {
	if p.waiting.Add(-1) > 0 && p.taken.Load() < p.max {
		p.signal()
	}
}

// held is the number of permits taken.
func (p *permits) held() int { return int(p.taken.Load()) }

// full reports whether every permit is taken.
func (p *permits) full() bool { return p.taken.Load() >= p.max }
