package rabbitmq

import (
	"context"
	"fmt"
	"math/rand/v2"
	"runtime"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
)

// These tests check coalesced acks against the broker. What the broker took
// is read by dropping the subscription's channel without sending what
// waits (drop): it then puts back every delivery it holds unacknowledged,
// and the queue's ready count says how many were never acked.

// coalescing returns the coalescer of sub's current channel.
func coalescing(t *testing.T, sub driver.Subscription) *coalescer {
	t.Helper()
	att := sub.(*subscription).cur.Load()
	if att == nil || att.ack.co == nil {
		t.Fatal("the subscription does not coalesce its acks")
	}
	return att.ack.co
}

// subscribe consumes q on c with the prefetch, closed at cleanup, and
// returns the subscription, its Receiver and its coalescer.
func subscribe(t *testing.T, c *conn, q string, prefetch int) (driver.Subscription, driver.Receiver, *coalescer) {
	t.Helper()
	sub, err := c.Consume(ctxFor(t, 10*time.Second), driver.ConsumeSpec{Queue: q, Prefetch: prefetch})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	return sub, sub.(driver.Receiver), coalescing(t, sub)
}

// busy marks the subscription of co busy, as it is while deliveries keep
// arriving: acks wait from now on (until it finds nothing waiting).
func busy(co *coalescer) { co.busy.Store(true) }

// drop ends sub and closes its channel without sending the acks that wait:
// the broker puts back whatever it still holds unacknowledged.
func drop(t *testing.T, sub driver.Subscription) {
	t.Helper()
	s := sub.(*subscription)
	s.mu.Lock()
	s.stopOnce.Do(func() { close(s.stop) })
	att := s.att
	s.mu.Unlock()
	att.s.forget(att.ack)
	if err := att.ch.Close(); err != nil {
		t.Fatalf("closing the channel: %v", err)
	}
}

// ready returns the queue's ready count.
func ready(t *testing.T, c *conn, q string) int {
	t.Helper()
	info, err := c.InspectQueue(ctxFor(t, 10*time.Second), q)
	if err != nil {
		t.Fatal(err)
	}
	return info.Messages
}

// publishIDs publishes one message per id to q, confirmed.
func publishIDs(t *testing.T, c *conn, q string, ids []string) {
	t.Helper()
	ctx := ctxFor(t, time.Minute)
	for _, id := range ids {
		if err := c.Publish(ctx, driver.Message{RoutingKey: q, Mandatory: true, MessageID: id}); err != nil {
			t.Fatal(err)
		}
	}
}

func ids(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = fmt.Sprintf("%s-%03d", prefix, i)
	}
	return out
}

// receiveN takes n deliveries with Receive.
func receiveN(t *testing.T, r driver.Receiver, n int) []driver.Delivery {
	t.Helper()
	out := make([]driver.Delivery, 0, n)
	for range n {
		d, ok := r.Receive()
		if !ok {
			t.Fatalf("the subscription ended after %d deliveries of %d", len(out), n)
		}
		out = append(out, d)
	}
	return out
}

// receiveLater calls Receive once on a goroutine, and returns what it got.
func receiveLater(r driver.Receiver) <-chan driver.Delivery {
	got := make(chan driver.Delivery, 1)
	go func() {
		if d, ok := r.Receive(); ok {
			got <- d
		}
		close(got)
	}()
	return got
}

func waitIdle(t *testing.T, co *coalescer, what string) {
	t.Helper()
	testenv.Eventually(t, what, func() bool { return !co.pending.Load() })
}

// A delivery left unsettled in the middle of acked ones, and one nacked in
// the middle, are never covered by a coalesced ack: the nacked one comes
// back, and the unsettled one is what the broker still holds when the
// channel goes. An idle consumer sends the acks that wait at once (the
// timer is an hour here).
func TestCoalescedAcksCoverOnlyAckedDeliveries(t *testing.T) {
	slowAcks(t)
	c := openTest(t, nil)
	q := tempQueue(t, c, driver.Queue{Name: uniqueName("coalesce"), Durable: true})
	want := ids("m", 40)
	publishIDs(t, c, q, want)
	sub, r, co := subscribe(t, c, q, 40)
	ds := receiveN(t, r, 40)
	busy(co)
	const held, nacked = 12, 25
	order := rand.Perm(len(ds))
	for _, i := range order {
		switch i {
		case held:
		case nacked:
			if err := ds[i].Nack(true); err != nil {
				t.Fatal(err)
			}
		default:
			if err := ds[i].Ack(); err != nil {
				t.Fatal(err)
			}
		}
	}
	again := <-receiveLater(r)
	if again.MessageID != want[nacked] || !again.Redelivered {
		t.Fatalf("after the nack got %q (redelivered %v), want %q again", again.MessageID, again.Redelivered, want[nacked])
	}
	if err := again.Ack(); err != nil {
		t.Fatal(err)
	}
	// Nothing more to hand up: the reader sends what waits before it
	// parks.
	last := receiveLater(r)
	waitIdle(t, co, "the idle consumer sending its acks")
	drop(t, sub)
	if d, ok := <-last; ok {
		t.Fatalf("received %q after the drop", d.MessageID)
	}
	if n := ready(t, c, q); n != 1 {
		t.Fatalf("after the drop the queue holds %d messages, want 1 (the one never settled)", n)
	}
	d, ok, err := c.Get(ctxFor(t, 10*time.Second), q)
	if err != nil || !ok {
		t.Fatalf("Get: %v, %v", ok, err)
	}
	if d.MessageID != want[held] || !d.Redelivered {
		t.Fatalf("the queue holds %q (redelivered %v), want %q", d.MessageID, d.Redelivered, want[held])
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
}

// An ack waits no longer than ackDelay when the consumer stays busy (here:
// it does not ask for the next delivery).
func TestCoalescedAckTimer(t *testing.T) {
	c := openTest(t, nil)
	q := tempQueue(t, c, driver.Queue{Name: uniqueName("coalesce-timer"), Durable: true})
	publishIDs(t, c, q, ids("t", 3))
	sub, r, co := subscribe(t, c, q, 40)
	ds := receiveN(t, r, 3)
	busy(co)
	for _, d := range ds {
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	waitIdle(t, co, "the timer sending the acks")
	drop(t, sub)
	if n := ready(t, c, q); n != 0 {
		t.Fatalf("after the drop the queue holds %d messages, want 0", n)
	}
}

// Eight readers settle out of order, with short gaps, a nack now and then
// and two deliveries held to the end, as a consumer with concurrency 8
// does: every message is acked once it is handled, the nacked ones come
// back, and the two held are all the broker still has.
func TestCoalescedAcksOutOfOrder(t *testing.T) {
	for _, prefetch := range []int{16, 50} {
		t.Run(fmt.Sprintf("prefetch%d", prefetch), func(t *testing.T) {
			testCoalescedAcksOutOfOrder(t, prefetch)
		})
	}
}

func testCoalescedAcksOutOfOrder(t *testing.T, prefetch int) {
	c := openTest(t, nil)
	q := tempQueue(t, c, driver.Queue{Name: uniqueName("coalesce-c8"), Durable: true})
	const n = 300
	want := ids("o", n)
	publishIDs(t, c, q, want)
	sub, r, co := subscribe(t, c, q, prefetch)
	holdIDs := []string{want[37], want[211]}
	var (
		mu     sync.Mutex
		acked  = map[string]int{}
		sent   = map[string]bool{} // acked, and its Ack returned
		nacked = map[string]bool{}
		held   []string
		wg     sync.WaitGroup
	)
	// Done once every Ack has returned: an ack that has not yet reached
	// the coalescer when the readers go idle would wait, and the drop
	// would lose it.
	done := func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(sent)+len(held) == n
	}
	for w := range 8 {
		wg.Go(func() {
			rng := rand.New(rand.NewPCG(uint64(w), 1))
			for {
				d, ok := r.Receive()
				if !ok {
					return
				}
				if rng.IntN(4) == 0 {
					time.Sleep(time.Duration(rng.IntN(300)) * time.Microsecond)
				}
				mu.Lock()
				switch {
				case slices.Contains(holdIDs, d.MessageID):
					held = append(held, d.MessageID)
					mu.Unlock()
					continue
				case !nacked[d.MessageID] && rng.IntN(10) == 0:
					nacked[d.MessageID] = true
					mu.Unlock()
					if err := d.Nack(true); err != nil {
						t.Error(err)
					}
					continue
				}
				acked[d.MessageID]++
				mu.Unlock()
				if err := d.Ack(); err != nil {
					t.Error(err)
				}
				mu.Lock()
				sent[d.MessageID] = true
				mu.Unlock()
			}
		})
	}
	testenv.Eventually(t, "every message handled", done)
	waitIdle(t, co, "the idle readers sending their acks")
	drop(t, sub)
	wg.Wait()
	for id, k := range acked {
		if k != 1 {
			t.Errorf("%s was handled %d times", id, k)
		}
	}
	if n := ready(t, c, q); n != len(holdIDs) {
		t.Fatalf("after the drop the queue holds %d messages, want %d (those never settled)", n, len(holdIDs))
	}
	var back []string
	for range holdIDs {
		d, ok, err := c.Get(ctxFor(t, 10*time.Second), q)
		if err != nil || !ok {
			t.Fatalf("Get: %v, %v", ok, err)
		}
		back = append(back, d.MessageID)
		_ = d.Ack()
	}
	slices.Sort(back)
	if !slices.Equal(back, holdIDs) {
		t.Fatalf("the queue held %v, want %v", back, holdIDs)
	}
}

// Readers that each wait for a delivery while the others take theirs, as
// the workers of a consumer with several of them do when deliveries come
// one at a time, keep the subscription busy: their acks wait and go
// together, one basic.ack covering the run, instead of one each.
func TestCoalescedAcksBusyWithWaitingReaders(t *testing.T) {
	slowAcks(t)
	c := openTest(t, nil)
	q := tempQueue(t, c, driver.Queue{Name: uniqueName("coalesce-waiting"), Durable: true})
	sub, r, co := subscribe(t, c, q, 40)
	const n = 4
	got := make([]<-chan driver.Delivery, n)
	for i := range got {
		got[i] = receiveLater(r)
	}
	testenv.Eventually(t, "the readers waiting for a delivery", func() bool { return waitingReaders() == n })
	publishIDs(t, c, q, ids("w", n))
	ds := make([]driver.Delivery, 0, n)
	for _, g := range got {
		d, ok := <-g
		if !ok {
			t.Fatal("a reader got no delivery")
		}
		ds = append(ds, d)
	}
	rec := newRecorder()
	co.mu.Lock()
	send := co.send
	co.send = func(tag uint64, multiple bool) error {
		_ = rec.send(tag, multiple)
		return send(tag, multiple)
	}
	co.mu.Unlock()
	for _, d := range ds {
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	if sent := rec.frames(); len(sent) != 0 || !co.pending.Load() {
		t.Fatalf("the acks were sent at once (%v): the subscription was not busy", sent)
	}
	if err := co.flush(); err != nil {
		t.Fatal(err)
	}
	if sent := rec.frames(); !slices.Equal(sent, frames(ackFrame{n, true})) {
		t.Fatalf("sent %v, want one ack of up to %d", sent, n)
	}
	drop(t, sub)
	if k := ready(t, c, q); k != 0 {
		t.Fatalf("after the drop the queue holds %d messages, want 0", k)
	}
}

// waitingReaders is how many goroutines that receiveLater started from the
// calling goroutine (not those of earlier tests) wait in
// subscription.await for a delivery.
func waitingReaders() int {
	buf := make([]byte, 1<<20)
	self := strings.Fields(string(buf[:runtime.Stack(buf, false)]))[1] // "goroutine N [running]:"
	for {
		n := runtime.Stack(buf, true)
		if n < len(buf) {
			buf = buf[:n]
			break
		}
		buf = make([]byte, 2*len(buf))
	}
	k := 0
	for _, g := range strings.Split(string(buf), "\n\n") {
		if strings.Contains(g, "[select") && strings.Contains(g, ".(*subscription).await(") &&
			strings.Contains(g, ".receiveLater in goroutine "+self+"\n") {
			k++
		}
	}
	return k
}

// Cancel and Close send what waits: nothing acked comes back.
func TestCoalescedAcksSentAtCancelAndClose(t *testing.T) {
	slowAcks(t)
	for _, how := range []string{"cancel", "close", "conn-close"} {
		t.Run(how, func(t *testing.T) {
			admin := openTest(t, nil)
			c := openTest(t, nil)
			q := tempQueue(t, admin, driver.Queue{Name: uniqueName("coalesce-" + how), Durable: true})
			publishIDs(t, admin, q, ids("x", 5))
			sub, r, co := subscribe(t, c, q, 40)
			ds := receiveN(t, r, 5)
			busy(co)
			for _, d := range ds {
				if err := d.Ack(); err != nil {
					t.Fatal(err)
				}
			}
			if !co.pending.Load() {
				t.Fatal("nothing waits: the test does not test anything")
			}
			switch how {
			case "cancel":
				if err := sub.Cancel(context.Background()); err != nil {
					t.Fatal(err)
				}
				drop(t, sub)
			case "close":
				if err := sub.Close(); err != nil {
					t.Fatal(err)
				}
			case "conn-close":
				if err := c.Close(); err != nil {
					t.Fatal(err)
				}
			}
			if n := ready(t, admin, q); n != 0 {
				t.Fatalf("the queue holds %d messages after %s, want 0", n, how)
			}
		})
	}
}
