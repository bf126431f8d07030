package rabbitmq

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestConfirmClock: a wait that starts between two ticks of the confirm
// clock times out at the ninth tick after it started, never the eighth:
// after between one and 1⅛ confirm timeouts. Each tick wakes the waits.
func TestConfirmClock(t *testing.T) {
	k := newConfirmClock(0) // ticks only when told
	k.tick()
	k.tick() // any phase
	deadline := k.start()
	defer k.end()
	for i := 1; i <= confirmTicks; i++ {
		now := k.at()
		k.tick()
		select {
		case <-now.next:
		default:
			t.Fatalf("tick %d did not wake the waits", i)
		}
		if k.at().n >= deadline {
			t.Fatalf("the wait timed out at tick %d; a tick is an eighth of the timeout, so it waited less than the timeout", i)
		}
	}
	k.tick()
	if k.at().n < deadline {
		t.Fatalf("the wait had not timed out at tick %d, more than 1⅛ timeouts after it started", confirmTicks+1)
	}
}

// TestConfirmWaitTimesOutOnTheClock: a publish whose confirm does not come
// fails with ErrConfirmTimeout once the clock reaches its deadline, and is
// abandoned (its permit comes back when its confirm arrives).
func TestConfirmWaitTimesOutOnTheClock(t *testing.T) {
	c := &conn{cfg: driver.Config{ConfirmTimeout: time.Minute}, clock: newConfirmClock(0)}
	p := &pending{dc: new(amqp.DeferredConfirmation)} // never resolved
	errc := make(chan error, 1)
	go func() { errc <- c.wait(context.Background(), p) }()
	testenv.Eventually(t, "the publish waiting", func() bool { return c.clock.waiting.Load() == 1 })
	for range confirmTicks + 1 {
		c.clock.tick()
	}
	err := <-errc
	if !errors.Is(err, driver.ErrConfirmTimeout) {
		t.Fatalf("wait = %v, want ErrConfirmTimeout", err)
	}
	if len(c.abandoned) != 1 || c.abandoned[0] != p {
		t.Errorf("the timed-out publish was not abandoned: %v", c.abandoned)
	}
	if n := c.clock.waiting.Load(); n != 0 {
		t.Errorf("%d waits still counted", n)
	}

	// Its context ending ends a wait too.
	ctx, cancel := context.WithCancel(context.Background())
	go func() { errc <- c.wait(ctx, &pending{dc: new(amqp.DeferredConfirmation)}) }()
	testenv.Eventually(t, "the publish waiting", func() bool { return c.clock.waiting.Load() == 1 })
	cancel()
	if err := <-errc; !errors.Is(err, context.Canceled) {
		t.Fatalf("wait with its context cancelled = %v", err)
	}
}

// TestConfirmClockRunsOnlyWhileWaited: the clock's timer ticks while a
// wait is on, and stops re-arming itself once none is.
func TestConfirmClockRunsOnlyWhileWaited(t *testing.T) {
	k := newConfirmClock(8 * time.Millisecond) // ticks every millisecond
	if k.armed.Load() {
		t.Fatal("an idle clock is armed")
	}
	deadline := k.start()
	testenv.Eventually(t, "the wait's deadline", func() bool { return k.at().n >= deadline })
	k.end()
	testenv.Eventually(t, "the clock to stop", func() bool { return !k.armed.Load() })
	n := k.at().n
	deadline = k.start() // and it starts again
	if deadline < n+confirmTicks+1 {
		t.Errorf("deadline %d at tick %d, want at least %d", deadline, n, n+confirmTicks+1)
	}
	testenv.Eventually(t, "the second wait's deadline", func() bool { return k.at().n >= deadline })
	k.end()
	testenv.Eventually(t, "the clock to stop", func() bool { return !k.armed.Load() })
}
