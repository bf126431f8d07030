package acemqtest

import (
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/memory"
)

// maxSteps bounds the timers one Clock.Advance fires one after another:
// a test that sets more is looping (a handler that asks for a retry
// forever, say).
const maxSteps = 10_000

// Clock is the clock of a memory:// broker, which the test moves: message
// and queue TTLs (the retry rungs, the scheduler's ladder), the waits a
// consumer makes (retries waiting in the consumer, in-progress delays),
// and the scheduler's due times follow it, and nothing timed happens
// until the test advances it. RabbitMQ keeps real time: the clock exists
// only on memory://.
type Clock struct {
	url  string
	fake *memory.FakeClock
}

// NewClock gives the memory:// broker at url (from URL) a clock of the
// test's own, reading the real time of the call cut to the whole second,
// and returns it. Call it before the first Connect to url: it fails the
// test otherwise.
func NewClock(t testing.TB, url string) *Clock {
	t.Helper()
	fake := memory.NewFakeClock(time.Now().Truncate(time.Second))
	if err := memory.SetClock(url, fake); err != nil {
		t.Fatalf("acemqtest: %v", err)
	}
	return &Clock{url: url, fake: fake}
}

// Now is the clock's time.
func (c *Clock) Now() time.Time { return c.fake.Now() }

// Advance moves the clock forward by d as time would pass, while conn's
// consumers work: it first waits until the consumers are idle
// (WaitIdle), then moves the clock to the earliest timer due within d,
// fires every timer due at that instant (a message's TTL, a rung's
// expiry, a retry waiting in a consumer), waits until the consumers are
// idle again, and repeats until no timer is due within d; then it sets the
// clock to its start plus d. So chains of waits play out in order within
// one call — a message that expires from a 1h rung, fails again and waits
// on the 2h rung is on the 2h rung's timer by the time the clock passes
// 1h — and when Advance returns, everything due by then has happened.
//
// conn must be a connection to the clock's broker; consumers are the
// consumers WaitIdle waits for (pass every consumer of the flow). Advance
// fails the test, as WaitIdle does, when the consumers do not become idle
// within Timeout of real time at any step, or when more than ten
// thousand timers fire one after another.
func (c *Clock) Advance(t testing.TB, d time.Duration, conn *acemq.Conn, consumers ...*acemq.Consumer) {
	t.Helper()
	if conn == nil || conn.Clock() != driver.Clock(c.fake) {
		t.Fatalf("acemqtest: Clock.Advance was given a connection that is not to the clock's broker %s", c.url)
	}
	end := c.fake.Now().Add(d)
	WaitIdle(t, conn, consumers...)
	for range maxSteps {
		next, ok := c.fake.Next()
		if !ok || next.After(end) {
			c.fake.Advance(end.Sub(c.fake.Now()))
			return
		}
		c.fake.Advance(next.Sub(c.fake.Now()))
		WaitIdle(t, conn, consumers...)
	}
	t.Fatalf("acemqtest: Clock.Advance(%v) fired %d timers one after another and more were due: is something retrying forever?", d, maxSteps)
}

// underClock reports whether conn keeps time on a test's clock.
func underClock(conn *acemq.Conn) bool {
	if conn == nil {
		return false
	}
	_, ok := conn.Clock().(*memory.FakeClock)
	return ok
}
