package acemqtest_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/schedule"
	"github.com/acemq/acemq/topology"
)

// clocked returns a clock of the test's own and a connection to its
// broker.
func clocked(t *testing.T) (*acemqtest.Clock, *acemq.Conn) {
	url := acemqtest.URL(t)
	clock := acemqtest.NewClock(t, url)
	return clock, acemqtest.Connect(t, url)
}

// consume starts a consumer of queue, closed when the test ends.
func consume(t *testing.T, conn *acemq.Conn, queue string, h acemq.Handler[order], opts ...acemq.ConsumeOption) *acemq.Consumer {
	t.Helper()
	c, err := acemq.Consume(context.Background(), conn, queue, h, opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c
}

// calls records, on the test's clock, when a handler ran.
type calls struct {
	clock *acemqtest.Clock
	start time.Time
	mu    sync.Mutex
	at    []time.Duration
}

func newCalls(c *acemqtest.Clock) *calls { return &calls{clock: c, start: c.Now()} }

// mark records a call now and returns how many there were before it.
func (c *calls) mark() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.at = append(c.at, c.clock.Now().Sub(c.start))
	return len(c.at) - 1
}

func (c *calls) want(t *testing.T, when string, want ...time.Duration) {
	t.Helper()
	c.mu.Lock()
	defer c.mu.Unlock()
	if !slices.Equal(c.at, want) {
		t.Fatalf("%s: the handler ran at %v on the clock, want %v", when, c.at, want)
	}
}

// TestClockThreeRungRetry: a retry over three broker rungs of 1h, 2h and
// 4h plays out as the test advances the clock, each attempt exactly when
// its rung expires, none before, and the last failure is dead-lettered.
func TestClockThreeRungRetry(t *testing.T) {
	ctx := context.Background()
	clock, conn := clocked(t)
	policy := retry.Exponential(4, time.Hour, 4*time.Hour)
	acemqtest.Declare(t, conn, topology.New().Queue("orders.new", topology.WithDeadLettering(true), acemq.WithRetry(policy)))
	settled := acemqtest.Record(t, conn)
	ran := newCalls(clock)
	consumer := consume(t, conn, "orders.new", func(ctx context.Context, m acemq.Message[order]) acemq.Ack {
		ran.mark()
		return acemq.Retry(errors.New("the warehouse is closed"))
	}, acemq.WithRetry(policy))
	if _, err := acemq.NewPublisher[order](conn, "").Send(ctx, "orders.new", order{ID: "o-1"}); err != nil {
		t.Fatal(err)
	}

	clock.Advance(t, time.Hour-time.Millisecond, conn, consumer)
	ran.want(t, "a millisecond before the 1h rung expires", 0)
	if held := acemqtest.Peek(t, conn, contract.RungQueue("orders.new", time.Hour)); len(held) != 1 {
		t.Fatalf("the 1h rung holds %d messages, want 1", len(held))
	}
	clock.Advance(t, time.Millisecond, conn, consumer)
	ran.want(t, "when the 1h rung expires", 0, time.Hour)
	clock.Advance(t, 6*time.Hour, conn, consumer)
	ran.want(t, "after 7h", 0, time.Hour, 3*time.Hour, 7*time.Hour)

	if got := settled.Count(acemq.OutcomeRetried); got != 3 {
		t.Errorf("%d retried, want 3: %v", got, settled.All())
	}
	if got := settled.Count(acemq.OutcomeDeadLettered); got != 1 {
		t.Errorf("%d dead-lettered, want 1: %v", got, settled.All())
	}
	if dead := acemqtest.Peek(t, conn, "orders.new.dlq"); len(dead) != 1 || dead[0].Envelope.Attempt() != 4 {
		t.Errorf("the dead-letter queue holds %v, want attempt 4", dead)
	}
}

// TestClockWaitsInTheConsumer: an in-progress delay and a retry waiting in
// the consumer (below the policy's broker threshold) end when the clock
// reaches them, not before.
func TestClockWaitsInTheConsumer(t *testing.T) {
	ctx := context.Background()
	clock, conn := clocked(t)
	policy := retry.Fixed(2, 10*time.Minute).WaitInBrokerFrom(24 * time.Hour)
	acemqtest.Declare(t, conn, topology.New().Queue("orders.new", topology.WithDeadLettering(true), acemq.WithRetry(policy)))
	settled := acemqtest.Record(t, conn)
	ran := newCalls(clock)
	consumer := consume(t, conn, "orders.new", func(ctx context.Context, m acemq.Message[order]) acemq.Ack {
		switch ran.mark() {
		case 0:
			return acemq.InProgress(30 * time.Minute)
		case 1:
			return acemq.Retry(errors.New("not yet"))
		}
		return acemq.Accept()
	}, acemq.WithRetry(policy))
	if _, err := acemq.NewPublisher[order](conn, "").Send(ctx, "orders.new", order{ID: "o-1"}); err != nil {
		t.Fatal(err)
	}

	clock.Advance(t, 30*time.Minute-time.Millisecond, conn, consumer)
	ran.want(t, "before the in-progress delay ends", 0)
	clock.Advance(t, time.Millisecond, conn, consumer)
	ran.want(t, "when the in-progress delay ends", 0, 30*time.Minute)
	clock.Advance(t, 10*time.Minute-time.Millisecond, conn, consumer)
	ran.want(t, "before the retry's wait ends", 0, 30*time.Minute)
	clock.Advance(t, time.Millisecond, conn, consumer)
	ran.want(t, "when the retry's wait ends", 0, 30*time.Minute, 40*time.Minute)
	// The order of the last two is not promised: a wait's settlement is
	// recorded once its copy is republished, which the next attempt may
	// overtake.
	for _, o := range []acemq.Outcome{acemq.OutcomeInProgress, acemq.OutcomeRetried, acemq.OutcomeAcked} {
		if n := settled.Count(o); n != 1 {
			t.Errorf("%d settlements %s, want 1: %v", n, o, settled.All())
		}
	}
}

// TestClockExpiresMessages: a message's TTL expires when the clock
// reaches it — from the head of the queue, as RabbitMQ does — and the
// expired message is dead-lettered.
func TestClockExpiresMessages(t *testing.T) {
	ctx := context.Background()
	clock, conn := clocked(t)
	acemqtest.Declare(t, conn, topology.New().Queue("offers", topology.WithDeadLettering(true)))
	pub := acemq.NewPublisher[order](conn, "")
	for _, ttl := range []time.Duration{10 * time.Minute, 20 * time.Minute} {
		if _, err := pub.Send(ctx, "offers", order{ID: ttl.String()}, acemq.WithExpiration(ttl)); err != nil {
			t.Fatal(err)
		}
	}
	held := func() (ready, dead int) {
		t.Helper()
		return len(acemqtest.Peek(t, conn, "offers")), len(acemqtest.Peek(t, conn, "offers.dlq"))
	}
	clock.Advance(t, 10*time.Minute-time.Millisecond, conn)
	if ready, dead := held(); ready != 2 || dead != 0 {
		t.Fatalf("before the first TTL: %d ready and %d dead-lettered, want 2 and 0", ready, dead)
	}
	clock.Advance(t, time.Millisecond, conn)
	if ready, dead := held(); ready != 1 || dead != 1 {
		t.Fatalf("at the first TTL: %d ready and %d dead-lettered, want 1 and 1", ready, dead)
	}
	clock.Advance(t, 10*time.Minute, conn)
	if ready, dead := held(); ready != 0 || dead != 2 {
		t.Fatalf("at the second TTL: %d ready and %d dead-lettered, want 0 and 2", ready, dead)
	}
}

// TestClockDeliversScheduledMessages: a message scheduled 90 minutes
// ahead climbs down the scheduler's rungs as the clock advances and is
// delivered when it is due (within the scheduler's one-second accuracy),
// not before.
func TestClockDeliversScheduledMessages(t *testing.T) {
	ctx := context.Background()
	clock, conn := clocked(t)
	acemqtest.Declare(t, conn, topology.New().Queue("reminders"))
	ctrl, err := schedule.Serve(ctx, conn)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ctrl.Close(context.Background()) })
	ran := newCalls(clock)
	consumer := consume(t, conn, "reminders", func(ctx context.Context, m acemq.Message[order]) acemq.Ack {
		ran.mark()
		return acemq.Accept()
	})
	const due = 90 * time.Minute
	if _, err := schedule.NewPublisher[order](conn, "").SendAfter(ctx, "reminders", due, order{ID: "o-1"}); err != nil {
		t.Fatal(err)
	}

	clock.Advance(t, due-2*time.Second, conn, ctrl, consumer)
	ran.want(t, "two seconds before it is due")
	clock.Advance(t, 2*time.Second, conn, ctrl, consumer)
	ran.mu.Lock()
	defer ran.mu.Unlock()
	if len(ran.at) != 1 || ran.at[0] < due-time.Second || ran.at[0] > due {
		t.Fatalf("the scheduled message was delivered at %v on the clock, want once, at %v or up to a second before", ran.at, due)
	}
}

// TestNewClockAfterConnect: a clock set on a broker already running would
// leave what it timed on real time: NewClock refuses.
func TestNewClockAfterConnect(t *testing.T) {
	url := acemqtest.URL(t)
	acemqtest.Connect(t, url)
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		acemqtest.NewClock(ft, url)
	}()
	if !ft.failed {
		t.Fatal("NewClock on a broker with a connection did not fail the test")
	}
}

// TestClockAdvanceOtherBroker: a clock moves its own broker only; given a
// connection to another, Advance fails the test rather than wait on a
// clock nothing there follows.
func TestClockAdvanceOtherBroker(t *testing.T) {
	clock := acemqtest.NewClock(t, acemqtest.URL(t))
	other := acemqtest.Connect(t, acemqtest.URL(t))
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		clock.Advance(ft, time.Hour, other)
	}()
	if !ft.failed {
		t.Fatal("Advance with a connection to another broker did not fail the test")
	}
}

// TestNewClockOnRabbitMQ: RabbitMQ keeps real time; NewClock refuses its
// URL rather than make a memory broker of that name.
func TestNewClockOnRabbitMQ(t *testing.T) {
	ft := &fakeT{TB: t}
	func() {
		defer func() { _ = recover() }()
		acemqtest.NewClock(ft, testenv.AMQPURL(t))
	}()
	if !ft.failed {
		t.Fatal("NewClock on a RabbitMQ URL did not fail the test")
	}
}

// fakeT records a Fatalf instead of failing the test.
type fakeT struct {
	testing.TB
	failed bool
}

func (f *fakeT) Helper() {}

func (f *fakeT) Fatalf(format string, args ...any) {
	f.failed = true
	panic("Fatalf")
}

// TestClockManyWaits: ten messages on four handlers, each retried twice
// in the consumer; every wait ends at its time on the clock, not before,
// and WaitIdle counts each one as waiting until then. (A retry held in the
// consumer is settled when its wait ends.)
func TestClockManyWaits(t *testing.T) {
	ctx := context.Background()
	clock, conn := clocked(t)
	start := clock.Now()
	policy := retry.Fixed(3, 10*time.Minute).WaitInBrokerFrom(24 * time.Hour)
	acemqtest.Declare(t, conn, topology.New().Queue("orders.new", topology.WithDeadLettering(true), acemq.WithRetry(policy)))
	settled := acemqtest.Record(t, conn)
	var calls atomic.Int32
	consumer := consume(t, conn, "orders.new", func(ctx context.Context, m acemq.Message[order]) acemq.Ack {
		calls.Add(1)
		if m.Envelope.Attempt() < 3 {
			return acemq.Retry(errors.New("not yet"))
		}
		return acemq.Accept()
	}, acemq.WithRetry(policy), acemq.WithConcurrency(4))
	pub := acemq.NewPublisher[order](conn, "")
	for i := range 10 {
		if _, err := pub.Send(ctx, "orders.new", order{ID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for _, step := range []struct {
		by                    time.Duration
		calls, retried, acked int
	}{
		{10*time.Minute - time.Millisecond, 10, 0, 0},
		{time.Millisecond, 20, 10, 0},
		{10*time.Minute - time.Millisecond, 20, 10, 0},
		{time.Millisecond, 30, 20, 10},
	} {
		clock.Advance(t, step.by, conn, consumer)
		c, r, a := int(calls.Load()), settled.Count(acemq.OutcomeRetried), settled.Count(acemq.OutcomeAcked)
		if c != step.calls || r != step.retried || a != step.acked {
			t.Fatalf("at %v on the clock: %d handler calls, %d retried and %d acked; want %d, %d and %d",
				clock.Now().Sub(start), c, r, a, step.calls, step.retried, step.acked)
		}
	}
}

// TestClockCloseEndsAWait: closing a consumer whose delivery waits on the
// clock does not wait for the clock: the wait ends, and the message is put
// back on its queue.
func TestClockCloseEndsAWait(t *testing.T) {
	ctx := context.Background()
	_, conn := clocked(t)
	acemqtest.Declare(t, conn, topology.New().Queue("orders.new", topology.WithDeadLettering(true)))
	settled := acemqtest.Record(t, conn)
	consumer, err := acemq.Consume(ctx, conn, "orders.new", func(ctx context.Context, m acemq.Message[order]) acemq.Ack {
		return acemq.InProgress(time.Hour)
	})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := acemq.NewPublisher[order](conn, "").Send(ctx, "orders.new", order{ID: "o-1"}); err != nil {
		t.Fatal(err)
	}
	acemqtest.WaitIdle(t, conn, consumer)
	if n := settled.Count(); n != 0 {
		t.Fatalf("%d settlements before the in-progress delay of an hour ended: %v", n, settled.All())
	}
	if err := consumer.Close(ctx); err != nil {
		t.Fatal(err)
	}
	if got := settled.All(); len(got) != 1 || got[0].Outcome != acemq.OutcomeInProgress {
		t.Fatalf("settlements after Close: %v, want one in progress", got)
	}
	if held := acemqtest.Peek(t, conn, "orders.new"); len(held) != 1 {
		t.Fatalf("the queue holds %d messages after Close, want the one put back", len(held))
	}
}

// TestConnClock: a connection keeps the time of its broker: real time on
// RabbitMQ and on a memory:// broker without a clock of the test's own.
func TestConnClock(t *testing.T) {
	for _, url := range []string{acemqtest.URL(t), testenv.AMQPURL(t)} {
		if got := acemqtest.Connect(t, url).Clock(); got != driver.RealClock {
			t.Errorf("the connection to %s keeps %T, want real time", url, got)
		}
	}
}

// TestClockHandsOverABatchAtItsWindow: a ConsumeBatch window follows the
// test's clock: a batch that has not filled is handed over when the clock
// reaches its window, not before, and Advance does not wait for it in real
// time.
func TestClockHandsOverABatchAtItsWindow(t *testing.T) {
	ctx := context.Background()
	clock, conn := clocked(t)
	acemqtest.Declare(t, conn, topology.New().Queue("meter.readings", topology.WithDeadLettering(true)))
	ran := newCalls(clock)
	var mu sync.Mutex
	var sizes []int
	consumer, err := acemq.ConsumeBatch(ctx, conn, "meter.readings", 10, time.Hour, func(ctx context.Context, ms []acemq.Message[order]) []acemq.Ack {
		ran.mark()
		mu.Lock()
		sizes = append(sizes, len(ms))
		mu.Unlock()
		acks := make([]acemq.Ack, len(ms))
		for i := range acks {
			acks[i] = acemq.Accept()
		}
		return acks
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = consumer.Close(context.Background()) })
	for i := range 3 {
		if _, err := acemq.NewPublisher[order](conn, "").Send(ctx, "meter.readings", order{ID: fmt.Sprint("r-", i)}); err != nil {
			t.Fatal(err)
		}
	}

	clock.Advance(t, time.Hour-time.Millisecond, conn, consumer)
	ran.want(t, "before the window ends")
	clock.Advance(t, time.Millisecond, conn, consumer)
	ran.want(t, "when the window ends", time.Hour)
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(sizes, []int{3}) {
		t.Errorf("batches of %v, want one of 3", sizes)
	}
}
