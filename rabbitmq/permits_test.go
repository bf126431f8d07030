package rabbitmq

import (
	"context"
	"runtime"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
)

// permitConn is a connection with only what acquire uses: its permits, its
// confirm timeout and its closing channel.
func permitConn(window int) *conn {
	return &conn{
		cfg:     driver.Config{MaxOutstanding: window, ConfirmTimeout: time.Minute},
		permits: newPermits(window),
		closing: make(chan struct{}),
	}
}

// TestPermitsBoundConcurrentPublishers: many publishers taking permits at
// once never hold more than the window between them, and every one gets
// through.
func TestPermitsBoundConcurrentPublishers(t *testing.T) {
	const window, publishers, each = 4, 32, 200
	c := permitConn(window)
	ctx := context.Background()
	var now, most, done atomic.Int32
	var wg sync.WaitGroup
	for range publishers {
		wg.Go(func() {
			for range each {
				if err := c.acquire(ctx); err != nil {
					t.Error(err)
					return
				}
				n := now.Add(1)
				for m := most.Load(); n > m && !most.CompareAndSwap(m, n); m = most.Load() {
				}
				runtime.Gosched()
				now.Add(-1)
				c.permits.release()
				done.Add(1)
			}
		})
	}
	wg.Wait()
	if m := most.Load(); m > window {
		t.Errorf("%d publishes held permits at once; the window is %d", m, window)
	}
	if n := done.Load(); n != publishers*each {
		t.Errorf("%d publishes got through, want %d", n, publishers*each)
	}
	if n := c.permits.held(); n != 0 {
		t.Errorf("%d permits still held", n)
	}
}

// waitPermit takes a permit of p the way acquire does, woken only by
// p.freed (acquire also looks now and then for abandoned publishes, which
// would hide a lost wake-up).
func waitPermit(p *permits) {
	if p.tryAcquire() {
		return
	}
	p.wait()
	defer p.done()
	for !p.tryAcquire() {
		<-p.freed
	}
}

// TestPermitWaitersWake: publishes waiting for a permit each get one as
// permits are given back, however many are given back at once; none is
// left asleep with a permit free.
func TestPermitWaitersWake(t *testing.T) {
	const window, waiters = 4, 12
	p := newPermits(window)
	for range window {
		if !p.tryAcquire() {
			t.Fatal("a permit of an idle window was refused")
		}
	}
	if p.tryAcquire() {
		t.Fatal("a permit beyond the window was given")
	}
	got := make(chan struct{}, waiters)
	var wg sync.WaitGroup
	for range waiters {
		wg.Go(func() {
			waitPermit(p)
			got <- struct{}{}
		})
	}
	testenv.Eventually(t, "every publish waiting for a permit", func() bool { return p.waiting.Load() == waiters })
	// Give every permit back at once: the signal holds one token, so the
	// waiters must pass it on.
	for range window {
		p.release()
	}
	for range window {
		<-got
	}
	testenv.Eventually(t, "the rest still waiting", func() bool { return p.waiting.Load() == waiters-window })
	// Each that got one gives it back in turn: the rest get through.
	for range waiters - window {
		p.release()
		<-got
	}
	wg.Wait()
	if n := p.held(); n != window {
		t.Errorf("%d permits held, want %d (the last waiters')", n, window)
	}
	if n := p.waiting.Load(); n != 0 {
		t.Errorf("%d still counted as waiting", n)
	}
}

// TestPermitWakeUpPassedOn: two permits given back while two publishes
// wait but neither is yet parked on the signal leave one token; the one
// woken by it passes it on, so the other wakes too.
func TestPermitWakeUpPassedOn(t *testing.T) {
	p := newPermits(2)
	p.tryAcquire()
	p.tryAcquire()
	p.wait() // waiter A, between its try and its receive
	p.wait() // waiter B, likewise
	p.release()
	p.release()
	if n := len(p.freed); n != 1 {
		t.Fatalf("%d tokens after two releases, want 1", n)
	}
	<-p.freed // A wakes
	if !p.tryAcquire() {
		t.Fatal("A found no permit")
	}
	p.done()
	select {
	case <-p.freed: // B wakes
	default:
		t.Fatal("A took its permit and left B asleep with another free")
	}
	if !p.tryAcquire() {
		t.Fatal("B found no permit")
	}
	p.done()
	// A waiter that gives up without a permit passes the token on too.
	p.wait() // C
	p.wait() // D
	p.release()
	<-p.freed
	p.done() // C gives up
	select {
	case <-p.freed:
	default:
		t.Fatal("C gave up and left D asleep with a permit free")
	}
	p.done()
}

// TestPermitWaiterGivesUp: a publish waiting for a permit returns when its
// context ends, and no longer counts as waiting.
func TestPermitWaiterGivesUp(t *testing.T) {
	c := permitConn(1)
	if !c.permits.tryAcquire() {
		t.Fatal("the one permit was refused")
	}
	ctx, cancel := context.WithCancel(context.Background())
	errc := make(chan error, 1)
	go func() { errc <- c.acquire(ctx) }()
	testenv.Eventually(t, "the publish waiting", func() bool { return c.permits.waiting.Load() == 1 })
	cancel()
	if err := <-errc; err == nil {
		t.Fatal("acquire took a permit that was held")
	}
	if n := c.permits.waiting.Load(); n != 0 {
		t.Errorf("%d still counted as waiting", n)
	}
	c.permits.release()
	if err := c.acquire(context.Background()); err != nil {
		t.Fatalf("acquire with a permit free: %v", err)
	}
}
