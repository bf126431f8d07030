package memory

import (
	"fmt"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/acemq/acemq/driver"
)

// SetClock makes the broker named name (a URL "memory://x" or its host and
// path "x") keep time on c instead of real time: its message and queue
// TTLs (and so the retry rungs and the scheduler's ladder) expire when c
// says, the x-death times and a stream's timestamps are c's, and its
// connections report c as their clock (driver.Clocked), so that package
// acemq and the packages built on it time their own waits on c too.
//
// It must be called before the broker's first connection, and holds until
// Reset. It fails when the broker already exists. Only memory:// brokers
// have a clock a test can set; RabbitMQ keeps real time.
func SetClock(name string, c driver.Clock) error {
	n, err := keyOf(name)
	if err != nil {
		return err
	}
	if c == nil {
		return fmt.Errorf("memory: SetClock(%q): the clock is nil", name)
	}
	brokersMu.Lock()
	defer brokersMu.Unlock()
	if _, ok := brokers[n]; ok {
		return fmt.Errorf("memory: SetClock(%q): the broker exists already; set its clock before its first connection (or Reset it first)", name)
	}
	b := newBroker(n)
	b.clock = c
	brokers[n] = b
	return nil
}

// keyOf is the broker key of a URL or of a key; a URL of another scheme
// is refused.
func keyOf(name string) (string, error) {
	if strings.HasPrefix(name, "memory:") || strings.Contains(name, "://") {
		return brokerName(name)
	}
	return name, nil
}

// Clock is the broker's clock, the one SetClock gave it or real time.
func (c *conn) Clock() driver.Clock { return c.b.clock }

// now is the broker's time.
func (b *broker) now() time.Time { return b.clock.Now() }

// FakeClock is a clock that moves only when Advance moves it, for tests of
// what happens over hours of TTLs, retries and schedules in no real time.
// Give it to a broker with SetClock (package acemqtest's NewClock does, and
// waits for the consumers between the steps).
//
// Its timers fire in the order of their due times (those due at the same
// instant in the order they were set), each with the clock reading its own
// due time, synchronously inside Advance: when Advance returns, every
// timer due by then has run, the memory broker's expiries included. What
// those timers only set in motion on other goroutines — a consumer's
// handler, a republish — has not necessarily happened yet; package
// acemqtest's Clock.Advance waits for that.
//
// A FakeClock is safe for concurrent use. Its zero value reads the zero
// time; NewFakeClock starts it where the test wants.
type FakeClock struct {
	step sync.Mutex // one Advance at a time

	mu     sync.Mutex
	now    time.Time
	seq    uint64
	timers []*fakeTimer // pending, by due time then seq
}

// NewFakeClock returns a clock reading start.
func NewFakeClock(start time.Time) *FakeClock {
	return &FakeClock{now: start}
}

// Now returns the clock's time.
func (c *FakeClock) Now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.now
}

// AfterFunc calls f when the clock has advanced by d: inside the Advance
// that reaches that time, on its goroutine, so f must not block nor call
// Advance. A d of zero or less calls f at once on a goroutine of its own,
// as time.AfterFunc does (its Timer's Stop then reports false).
func (c *FakeClock) AfterFunc(d time.Duration, f func()) driver.Timer {
	t := &fakeTimer{c: c, f: f}
	if d <= 0 {
		go f()
		return t
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.seq++
	t.at, t.seq = c.now.Add(d), c.seq
	i, _ := slices.BinarySearchFunc(c.timers, t, compareTimers)
	c.timers = slices.Insert(c.timers, i, t)
	return t
}

// Advance moves the clock forward by d (a negative d does nothing), firing
// every timer due by then, in order, each with the clock at its due time;
// timers that fired timers set are fired too when they are due by then.
func (c *FakeClock) Advance(d time.Duration) {
	c.step.Lock()
	defer c.step.Unlock()
	c.mu.Lock()
	end := c.now.Add(max(d, 0))
	for len(c.timers) > 0 && !c.timers[0].at.After(end) {
		t := c.timers[0]
		c.timers = slices.Delete(c.timers, 0, 1)
		c.now = t.at
		c.mu.Unlock()
		t.f()
		c.mu.Lock()
	}
	c.now = end
	c.mu.Unlock()
}

// Next returns the due time of the earliest pending timer, and false when
// none is pending.
func (c *FakeClock) Next() (time.Time, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if len(c.timers) == 0 {
		return time.Time{}, false
	}
	return c.timers[0].at, true
}

// Pending is the number of timers that have not fired nor been stopped.
func (c *FakeClock) Pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.timers)
}

// fakeTimer is a timer of a FakeClock.
type fakeTimer struct {
	c   *FakeClock
	at  time.Time
	seq uint64
	f   func()
}

func compareTimers(a, b *fakeTimer) int {
	if c := a.at.Compare(b.at); c != 0 {
		return c
	}
	switch {
	case a.seq < b.seq:
		return -1
	case a.seq > b.seq:
		return 1
	}
	return 0
}

// Stop removes the timer if it is still pending.
func (t *fakeTimer) Stop() bool {
	c := t.c
	c.mu.Lock()
	defer c.mu.Unlock()
	i, ok := slices.BinarySearchFunc(c.timers, t, compareTimers)
	if !ok || c.timers[i] != t {
		return false
	}
	c.timers = slices.Delete(c.timers, i, i+1)
	return true
}
