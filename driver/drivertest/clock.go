package drivertest

import (
	"time"

	"github.com/acemq/acemq/driver"
)

// testClock checks a driver.Clocked: the clock it reports is the one its
// broker keeps. A timer of the clock fires with the clock past its time,
// and a message whose time to live has passed on the clock is
// dead-lettered with an x-death time (whole seconds) between the clock's
// readings before the publish and after the expiry.
func testClock(e *env, c driver.Clocked) {
	t := e.t
	clk := c.Clock()
	if clk == nil {
		t.Fatal("Clock returned nil")
	}
	const ttl = 50 * time.Millisecond
	start := clk.Now()
	fired := make(chan time.Time, 1)
	clk.AfterFunc(ttl, func() { fired <- clk.Now() })
	select {
	case at := <-fired:
		if at.Sub(start) < ttl {
			t.Errorf("a timer of %v fired when the clock had moved %v", ttl, at.Sub(start))
		}
	case <-time.After(waitFor):
		t.Fatalf("a timer of %v of the driver's clock did not fire within %v", ttl, waitFor)
	}

	if !e.caps.DeadLettering {
		return
	}
	dlx, dlq := e.dlxSetup("clock-expired")
	src := e.name("clock-src")
	e.queue(e.admin, driver.Queue{Name: src, Durable: true, Args: driver.Table{
		"x-message-ttl": ttl.Milliseconds(), "x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "clock-expired",
	}})
	before := clk.Now().Truncate(time.Second)
	e.publish(e.admin, driver.Message{RoutingKey: src, Body: []byte("brief")})
	d := e.get(e.admin, dlq)
	defer func() { _ = d.Ack() }()
	after := clk.Now()
	x := e.firstDeath(d)
	at, ok := x["time"].(time.Time)
	if !ok || at.Before(before) || at.After(after) {
		t.Errorf("x-death time %v (%T), want the clock's, between %v and %v", x["time"], x["time"], before, after)
	}
}
