package memory

import (
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
)

var epoch = time.Date(2030, 1, 1, 0, 0, 0, 0, time.UTC)

// TestFakeClockOrder: timers fire in the order of their due times, those
// due together in the order they were set, each with the clock at its due
// time; a timer a firing timer sets fires in the same Advance when it is
// due by then; a stopped timer never fires.
func TestFakeClockOrder(t *testing.T) {
	c := NewFakeClock(epoch)
	var fired []string
	set := func(name string, d time.Duration) driver.Timer {
		return c.AfterFunc(d, func() {
			fired = append(fired, name+"@"+c.Now().Sub(epoch).String())
		})
	}
	set("c", 3*time.Hour)
	set("a", time.Hour)
	set("b", 2*time.Hour)
	set("a2", time.Hour)
	stopped := set("never", 90*time.Minute)
	c.AfterFunc(2*time.Hour, func() { set("nested", 30*time.Minute) })
	if !stopped.Stop() || stopped.Stop() {
		t.Fatal("Stop did not report the pending timer stopped once")
	}
	if next, ok := c.Next(); !ok || !next.Equal(epoch.Add(time.Hour)) || c.Pending() != 5 {
		t.Fatalf("Next %v %v, Pending %d; want 1h and 5", next, ok, c.Pending())
	}

	c.Advance(time.Hour - time.Nanosecond)
	if len(fired) != 0 {
		t.Fatalf("fired %v before any was due", fired)
	}
	c.Advance(time.Nanosecond + 30*time.Minute)
	if want := []string{"a@1h0m0s", "a2@1h0m0s"}; !slices.Equal(fired, want) {
		t.Fatalf("fired %v, want %v", fired, want)
	}
	if got := c.Now().Sub(epoch); got != 90*time.Minute {
		t.Fatalf("the clock reads %v after advancing 90m", got)
	}
	c.Advance(2 * time.Hour)
	want := []string{"a@1h0m0s", "a2@1h0m0s", "b@2h0m0s", "nested@2h30m0s", "c@3h0m0s"}
	if !slices.Equal(fired, want) {
		t.Fatalf("fired %v, want %v", fired, want)
	}
	if _, ok := c.Next(); ok || c.Pending() != 0 {
		t.Fatalf("%d timers pending after all fired", c.Pending())
	}
}

// TestFakeClockNow: a timer due at once runs without an Advance, as
// time.AfterFunc's does; a negative Advance does nothing.
func TestFakeClockNow(t *testing.T) {
	c := NewFakeClock(epoch)
	done := make(chan struct{})
	c.AfterFunc(0, func() { close(done) })
	<-done
	c.Advance(-time.Hour)
	if !c.Now().Equal(epoch) {
		t.Fatalf("the clock moved back to %v", c.Now())
	}
}

// TestClockExpiresOnAdvance: on a broker with a fake clock, a queue's TTL
// expires when the clock reaches it — by the broker's own timer, inside
// Advance, with nobody reading the queue — and x-death carries the
// clock's time.
func TestClockExpiresOnAdvance(t *testing.T) {
	url := newURL(t)
	clock := NewFakeClock(epoch)
	if err := SetClock(url, clock); err != nil {
		t.Fatal(err)
	}
	c := dial(t, url)
	if got := driver.ClockOf(c); got != clock {
		t.Fatalf("the connection's clock is %T, want the broker's", got)
	}
	mustQueue(t, c, driver.Queue{Name: "dead", Durable: true})
	mustQueue(t, c, driver.Queue{Name: "held", Durable: true, Args: driver.Table{
		"x-message-ttl": int64(time.Hour / time.Millisecond), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead",
	}})
	mustPublish(t, c, driver.Message{RoutingKey: "held", Body: []byte("x")})
	clock.Advance(time.Hour - time.Millisecond)
	if n := messages(t, c, "held"); n != 1 {
		t.Fatalf("%d messages on the queue a millisecond before its TTL, want 1", n)
	}
	clock.Advance(time.Millisecond)
	if n := messages(t, c, "dead"); n != 1 {
		t.Fatalf("%d messages dead-lettered when the TTL was reached, want 1", n)
	}
	d := mustGet(t, c, "dead")
	deaths := deathEntries(d.Headers["x-death"])
	if len(deaths) != 1 || deaths[0]["reason"] != "expired" || !deaths[0]["time"].(time.Time).Equal(epoch.Add(time.Hour)) {
		t.Fatalf("x-death %v, want one expiry at the clock's 1h", deaths)
	}
}

// TestSetClockRefused: a broker that exists keeps its clock, and only a
// memory:// URL names a broker.
func TestSetClockRefused(t *testing.T) {
	if err := SetClock("amqp://guest:secret@127.0.0.1:5672/", NewFakeClock(epoch)); err == nil || !strings.Contains(err.Error(), "memory scheme") || strings.Contains(err.Error(), "secret") {
		t.Fatalf("SetClock on an amqp:// URL: %v", err)
	}
	brokersMu.Lock()
	_, made := brokers["amqp://guest:secret@127.0.0.1:5672/"]
	brokersMu.Unlock()
	if made {
		t.Fatal("SetClock on an amqp:// URL made a memory broker of it")
	}
	url := newURL(t)
	if err := SetClock(url, nil); err == nil || !strings.Contains(err.Error(), "nil") {
		t.Fatalf("SetClock with a nil clock: %v", err)
	}
	dial(t, url)
	err := SetClock(url, NewFakeClock(epoch))
	if err == nil || !strings.HasPrefix(err.Error(), "memory: ") || !strings.Contains(err.Error(), "exists already") {
		t.Fatalf("SetClock on a running broker: %v", err)
	}
}
