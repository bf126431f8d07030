package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
)

// TestCloseAfterAnAbandonedCancelReturns: a Cancel whose context ends
// before the broker's basic.cancel-ok leaves amqp091's Channel.Cancel
// waiting; a Close at that moment must not send channel.close alongside
// it (the replies would reach the wrong waiter and Close would wait for
// ever). Many subscriptions are cancelled with contexts that end after a
// few microseconds, then closed, the deliveries they hold unsettled; every
// Close returns, and the deliveries go back to the queue.
func TestCloseAfterAnAbandonedCancelReturns(t *testing.T) {
	c := openTest(t, nil)
	ctx := ctxFor(t, 2*time.Minute)
	q := tempQueue(t, c, driver.Queue{})
	const workers, rounds = 4, 400
	publishN(t, c, q, workers)
	var wg sync.WaitGroup
	errs := make(chan error, workers)
	for w := range workers {
		wg.Go(func() {
			for i := range rounds {
				sub, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q, Prefetch: 1})
				if err != nil {
					errs <- err
					return
				}
				if i%2 == 0 {
					// Hold a delivery (when one comes) unsettled.
					select {
					case <-sub.Deliveries():
					case <-time.After(time.Millisecond):
					}
				}
				cctx, cancel := context.WithTimeout(ctx, time.Duration((i+w)%20)*25*time.Microsecond)
				_ = sub.Cancel(cctx) // it may give up: that is the point
				cancel()
				if err := sub.Close(); err != nil {
					errs <- err
					return
				}
			}
		})
	}
	done := make(chan struct{})
	go func() {
		wg.Wait()
		close(done)
	}()
	select {
	case <-done:
	case <-time.After(time.Minute):
		// Closing the connection (at cleanup) ends the stuck Closes.
		t.Fatal("a subscription's Close after an abandoned Cancel has not returned within a minute")
	}
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	// Nothing was settled: every message is back on the queue.
	waitDepth(t, c, q, workers)
}

// waitDepth waits until q holds n ready messages.
func waitDepth(t *testing.T, c *conn, q string, n int) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%d messages on %s", n, q), func() bool {
		info, err := c.InspectQueue(ctxFor(t, 10*time.Second), q)
		return err == nil && info.Messages == n
	})
}

// TestCloseIsBoundedWhenACancelIsNotAnswered: when the broker does not
// answer an abandoned basic.cancel, Close waits for it only cancelWait,
// and the channel is closed once the answer comes: the delivery held
// unsettled goes back to the queue.
func TestCloseIsBoundedWhenACancelIsNotAnswered(t *testing.T) {
	old := cancelWait
	cancelWait = 50 * time.Millisecond
	t.Cleanup(func() { cancelWait = old })
	p := newProxy(t, nil)
	c := openTest(t, func(cfg *driver.Config) { cfg.URLs = []string{p.url("amqp")} })
	ctx := ctxFor(t, time.Minute)
	q := tempQueue(t, c, driver.Queue{})
	publishN(t, c, q, 1)
	sub, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q, Prefetch: 1})
	if err != nil {
		t.Fatal(err)
	}
	if _, ok := <-sub.Deliveries(); !ok {
		t.Fatal("no delivery")
	}
	s := c.cur.Load()
	p.pause() // the broker's answers are held back
	cctx, cancel := context.WithTimeout(ctx, 10*time.Millisecond)
	defer cancel()
	if err := sub.Cancel(cctx); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("Cancel with the answers held back: %v, want the context's error", err)
	}
	closed := make(chan error, 1)
	go func() { closed <- sub.Close() }()
	select {
	case err := <-closed:
		if err != nil {
			t.Fatal(err)
		}
		if s.ac.IsClosed() {
			// amqp091's heartbeat gave up on the held-back connection.
			p.unpause()
			t.Fatal("Close returned only once the connection was lost")
		}
	case <-time.After(30 * time.Second):
		p.unpause()
		t.Fatal("Close waited for the broker's answer to the abandoned basic.cancel")
	}
	p.unpause()
	waitDepth(t, c, q, 1)
}
