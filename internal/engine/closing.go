package engine

import (
	"sync"

	"github.com/acemq/acemq/driver"
)

// closings counts the subscription closes running in the background, so
// that a consumer's Close and the connection's close can wait for them.
// Unlike a sync.WaitGroup, a close may start while another goroutine
// waits.
type closings struct {
	mu   sync.Mutex
	n    int
	idle chan struct{} // closed when n drops to 0; nil while n is 0
}

// add records a close starting.
func (t *closings) add() {
	t.mu.Lock()
	if t.n == 0 {
		t.idle = make(chan struct{})
	}
	t.n++
	t.mu.Unlock()
}

// done records a close finished.
func (t *closings) done() {
	t.mu.Lock()
	t.n--
	if t.n == 0 {
		close(t.idle)
		t.idle = nil
	}
	t.mu.Unlock()
}

// wait returns a channel closed once no close runs: at once if none does.
func (t *closings) wait() <-chan struct{} {
	t.mu.Lock()
	defer t.mu.Unlock()
	if t.n == 0 {
		return closedChan
	}
	return t.idle
}

var closedChan = func() chan struct{} {
	c := make(chan struct{})
	close(c)
	return c
}()

// closeSub closes a subscription of the consumer once, in the background:
// a driver's Subscription.Close may wait on the broker, and neither a
// worker nor the consumer's Close is held up by it for longer than the
// consumer's Close allows. The close is tracked by the consumer (its Close
// waits for it within its context) and by the connection (Conn.AwaitClosing,
// after the driver connection is closed, which ends it).
func (f *flowState) closeSub(sub driver.Subscription) {
	f.closes.add()
	f.conn.closes.add()
	go func() {
		defer f.conn.closes.done()
		defer f.closes.done()
		_ = sub.Close()
	}()
}

// AwaitClosing waits for the consumers' subscription closes still running
// in the background (those a consumer's Close stopped waiting for when its
// context ended). Call it after closing the driver connection, which ends
// them (driver.Conn.Close).
func (c *Conn) AwaitClosing() {
	<-c.closes.wait()
}
