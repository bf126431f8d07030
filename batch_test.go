package acemq_test

import (
	"context"
	"errors"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/retry"
)

// ConsumeBatch's promises, each run on memory:// and on RabbitMQ.
var batchPaths = []enginePath{
	{"BySize", testBatchBySize},
	{"ByWindow", testBatchByWindow},
	{"EachMessageSettledOnItsOwn", testBatchPerMessage},
	{"PrefetchIsTheBatch", testBatchPrefetch},
	{"CloseHandsOverAPartialBatch", testBatchClose},
	{"PauseHandsOverAPartialBatch", testBatchPause},
	{"DrainOutCancelsTheContext", testBatchDrainOut},
	{"PanicDeadLettersTheBatch", testBatchPanic},
	{"UndecodableNeverJoins", testBatchUndecodable},
}

func TestConsumeBatchMemory(t *testing.T) { runPaths(t, batchPaths, memoryBackend) }

func TestConsumeBatchRabbitMQ(t *testing.T) {
	rabbitBackend.open(t) // skip early when no broker is configured
	runPaths(t, batchPaths, rabbitBackend)
}

// hour is a window no test waits for: a batch handed over before it is
// handed over for another reason.
const hour = time.Hour

// ids are the payload ids of a batch.
func ids(ms []acemq.Message[order]) []string {
	out := make([]string, len(ms))
	for i, m := range ms {
		out[i] = m.Payload.ID
	}
	return out
}

// acceptAll is a batch handler that reports each batch's ids on got and
// accepts them all.
func acceptAll(got chan []string) func(context.Context, []acemq.Message[order]) []acemq.Ack {
	return func(_ context.Context, ms []acemq.Message[order]) []acemq.Ack {
		got <- ids(ms)
		return make([]acemq.Ack, len(ms))
	}
}

func testBatchBySize(t *testing.T, b backend) {
	r := newRig(t, b)
	got := make(chan []string, 4)
	r.track(acemq.ConsumeBatch(context.Background(), r.conn, r.q, 3, hour, acceptAll(got)))
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		r.publish(id, acemq.Envelope{})
	}
	// Only the size can hand a batch over here; each holds its messages
	// in the order the broker delivered them.
	for _, want := range []string{"a b c", "d e f"} {
		if batch := strings.Join(brokertest.Receive(t, got), " "); batch != want {
			t.Errorf("batch [%s], want [%s]", batch, want)
		}
	}
	for range 6 {
		checkSettlement(t, r.next(), acemq.DecisionAccept, acemq.OutcomeAcked, "")
	}
}

func testBatchByWindow(t *testing.T, b backend) {
	r := newRig(t, b)
	got := make(chan []string, 4)
	r.track(acemq.ConsumeBatch(context.Background(), r.conn, r.q, 100, 20*time.Millisecond, acceptAll(got)))
	r.publish("a", acemq.Envelope{})
	r.publish("b", acemq.Envelope{})
	// Two messages never fill a batch of 100: only the window hands them
	// over, in one batch or two.
	n := 0
	for n < 2 {
		n += len(brokertest.Receive(t, got))
	}
	if n != 2 {
		t.Errorf("handled %d messages, want 2", n)
	}
	for range 2 {
		checkSettlement(t, r.next(), acemq.DecisionAccept, acemq.OutcomeAcked, "")
	}
}

func testBatchPerMessage(t *testing.T, b backend) {
	r := newRig(t, b)
	var mu sync.Mutex
	calls := map[string][]int{} // id → attempts seen
	r.track(acemq.ConsumeBatch(context.Background(), r.conn, r.q, 3, 50*time.Millisecond,
		func(_ context.Context, ms []acemq.Message[order]) []acemq.Ack {
			acks := make([]acemq.Ack, len(ms))
			mu.Lock()
			defer mu.Unlock()
			for i, m := range ms {
				calls[m.Payload.ID] = append(calls[m.Payload.ID], m.Envelope.Attempt())
				switch {
				case m.Payload.ID == "retry" && m.Envelope.Attempt() == 1:
					acks[i] = acemq.Retry(errTransient)
				case m.Payload.ID == "reject":
					acks[i] = acemq.Reject(errors.New("no such customer"))
				}
			}
			return acks
		}, acemq.WithRetry(retry.Fixed(2, time.Second).WaitInBrokerFrom(time.Second))))
	rung := r.q + ".retry.1s"
	envs := map[string]acemq.Envelope{}
	for _, id := range []string{"ok", "retry", "reject"} {
		envs[id] = r.publish(id, acemq.Envelope{})
	}
	byID := map[string][]acemq.Settlement{}
	for range 4 {
		s := r.next()
		for id, env := range envs {
			if env.ID() == s.Envelope.ID() {
				byID[id] = append(byID[id], s)
			}
		}
	}
	if s := byID["ok"]; len(s) != 1 {
		t.Errorf("ok settled %d times", len(s))
	} else {
		checkSettlement(t, s[0], acemq.DecisionAccept, acemq.OutcomeAcked, "")
	}
	if s := byID["reject"]; len(s) != 1 {
		t.Errorf("reject settled %d times", len(s))
	} else {
		checkSettlement(t, s[0], acemq.DecisionReject, acemq.OutcomeRejected, r.q+".dlq")
		checkSetAside(t, r.get(r.q+".dlq"), envs["reject"], `{"id":"reject"}`, "the handler rejected it: Error: no such customer", 1)
	}
	if s := byID["retry"]; len(s) != 2 {
		t.Errorf("retry settled %d times, want 2", len(s))
	} else {
		if s[0].Envelope.Attempt() > s[1].Envelope.Attempt() {
			s[0], s[1] = s[1], s[0]
		}
		checkSettlement(t, s[0], acemq.DecisionRetry, acemq.OutcomeRetried, rung)
		if s[0].Where != acemq.WhereBroker {
			t.Errorf("the retry waited in %q, want the rung", s[0].Where)
		}
		checkSettlement(t, s[1], acemq.DecisionAccept, acemq.OutcomeAcked, "")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(calls["ok"]) != 1 || len(calls["reject"]) != 1 || len(calls["retry"]) != 2 || calls["retry"][1] != 2 {
		t.Errorf("the handler saw %v: only the retried message may come back, as attempt 2", calls)
	}
	r.messages(r.q+".dlq", 0)
}

func testBatchPrefetch(t *testing.T, b backend) {
	r := newRig(t, b)
	got := make(chan []string, 4)
	release := make(chan struct{})
	c := r.track(acemq.ConsumeBatch(context.Background(), r.conn, r.q, 3, hour,
		func(ctx context.Context, ms []acemq.Message[order]) []acemq.Ack {
			got <- ids(ms)
			<-release
			return make([]acemq.Ack, len(ms))
		}))
	for _, id := range []string{"a", "b", "c", "d", "e", "f"} {
		r.publish(id, acemq.Envelope{})
	}
	brokertest.Receive(t, got)
	// The handler holds the first batch: with the prefetch at the batch's
	// size, the broker hands over nothing more.
	r.messages(r.q, 3)
	if n := c.InFlight(); n != 3 {
		t.Errorf("%d messages in flight, want the batch's 3", n)
	}
	close(release)
	if batch := brokertest.Receive(t, got); len(batch) != 3 {
		t.Errorf("second batch %v", batch)
	}
	for range 6 {
		checkSettlement(t, r.next(), acemq.DecisionAccept, acemq.OutcomeAcked, "")
	}
}

func testBatchClose(t *testing.T, b backend) {
	r := newRig(t, b)
	got := make(chan []string, 1)
	c := r.track(acemq.ConsumeBatch(context.Background(), r.conn, r.q, 10, hour, acceptAll(got)))
	r.publish("a", acemq.Envelope{})
	r.publish("b", acemq.Envelope{})
	testenv.Eventually(t, "both messages to wait in the batch", func() bool { return c.InFlight() == 2 })
	if err := c.Close(context.Background()); err != nil {
		t.Fatal(err)
	}
	if batch := brokertest.Receive(t, got); len(batch) != 2 {
		t.Errorf("Close handed over %v, want both messages", batch)
	}
	for range 2 {
		checkSettlement(t, r.next(), acemq.DecisionAccept, acemq.OutcomeAcked, "")
	}
	r.messages(r.q, 0)
}

func testBatchPause(t *testing.T, b backend) {
	r := newRig(t, b)
	got := make(chan []string, 2)
	c := r.track(acemq.ConsumeBatch(context.Background(), r.conn, r.q, 10, hour, acceptAll(got)))
	r.publish("a", acemq.Envelope{})
	r.publish("b", acemq.Envelope{})
	testenv.Eventually(t, "both messages to wait in the batch", func() bool { return c.InFlight() == 2 })
	// Pause returns once the running handlers have: the batch being
	// gathered is handed over without waiting out its window.
	ctx, cancel := context.WithTimeout(context.Background(), waitFor)
	defer cancel()
	if err := c.Pause(ctx); err != nil {
		t.Fatal(err)
	}
	if batch := brokertest.Receive(t, got); len(batch) != 2 {
		t.Errorf("Pause handed over %v, want both messages", batch)
	}
	for range 2 {
		checkSettlement(t, r.next(), acemq.DecisionAccept, acemq.OutcomeAcked, "")
	}
	if err := c.Resume(ctx); err != nil {
		t.Fatal(err)
	}
	for _, id := range []string{"c", "d", "e", "f", "g", "h", "i", "j", "k", "l"} {
		r.publish(id, acemq.Envelope{})
	}
	if batch := brokertest.Receive(t, got); len(batch) != 10 {
		t.Errorf("after Resume a batch of %d, want 10", len(batch))
	}
}

func testBatchDrainOut(t *testing.T, b backend) {
	r := newRig(t, b)
	cause := make(chan error, 1)
	c := r.track(acemq.ConsumeBatch(context.Background(), r.conn, r.q, 10, hour,
		func(ctx context.Context, ms []acemq.Message[order]) []acemq.Ack {
			<-ctx.Done() // a bulk write that honours its context
			cause <- ctx.Err()
			return make([]acemq.Ack, len(ms))
		}, acemq.WithDrainTimeout(50*time.Millisecond)))
	r.publish("a", acemq.Envelope{})
	testenv.Eventually(t, "the message to wait in the batch", func() bool { return c.InFlight() == 1 })
	var de *acemq.DrainError
	if err := c.Close(context.Background()); !errors.As(err, &de) || de.Stranded != 1 {
		t.Fatalf("Close: %v, want a *DrainError stranding 1", err)
	}
	if err := brokertest.Receive(t, cause); !errors.Is(err, context.Canceled) {
		t.Errorf("the handler's context ended with %v", err)
	}
	if s := r.next(); s.Outcome != acemq.OutcomeRequeued {
		t.Errorf("outcome %q, want the stranded delivery put back", s.Outcome)
	}
	r.messages(r.q, 1)
}

func testBatchPanic(t *testing.T, b backend) {
	r := newRig(t, b)
	r.track(acemq.ConsumeBatch(context.Background(), r.conn, r.q, 2, hour,
		func(_ context.Context, ms []acemq.Message[order]) []acemq.Ack {
			if ms[0].Payload.ID == "short" || ms[1].Payload.ID == "short" {
				return nil
			}
			panic("the bulk insert blew up")
		}))
	r.publish("a", acemq.Envelope{})
	r.publish("b", acemq.Envelope{})
	for range 2 {
		s := r.next()
		checkSettlement(t, s, acemq.DecisionReject, acemq.OutcomeRejected, r.q+".dlq")
		var pe *acemq.PanicError
		if !errors.As(s.Err, &pe) || s.Reason != "the handler reported an unprocessable message: PanicError: panic: the bulk insert blew up" {
			t.Errorf("err %v reason %q", s.Err, s.Reason)
		}
	}
	r.publish("short", acemq.Envelope{})
	r.publish("c", acemq.Envelope{})
	for range 2 {
		s := r.next()
		checkSettlement(t, s, acemq.DecisionReject, acemq.OutcomeRejected, r.q+".dlq")
		if s.Reason != "the handler reported an unprocessable message: Error: acemq: the batch handler returned 0 decisions for 2 messages" {
			t.Errorf("reason %q", s.Reason)
		}
	}
	r.messages(r.q+".dlq", 4)
}

func testBatchUndecodable(t *testing.T, b backend) {
	r := newRig(t, b)
	got := make(chan []string, 2)
	r.track(acemq.ConsumeBatch(context.Background(), r.conn, r.q, 2, hour, acceptAll(got)))
	r.publishRaw(driver.Message{ContentType: "application/json", MessageID: "bad", Body: []byte(`{"id":`)})
	s := r.next()
	checkSettlement(t, s, acemq.DecisionPark, acemq.OutcomeParked, r.q+".parked")
	if !strings.HasPrefix(s.Reason, "could not be decoded: ") {
		t.Errorf("reason %q", s.Reason)
	}
	r.publish("a", acemq.Envelope{})
	r.publish("b", acemq.Envelope{})
	if batch := brokertest.Receive(t, got); len(batch) != 2 {
		t.Errorf("batch %v, want a and b (the undecodable body never joins one)", batch)
	}
}

func TestConsumeBatchRefuses(t *testing.T) {
	conn := memoryBackend.open(t)
	q := testenv.Unique(t, "acemq-batch")
	h := func(_ context.Context, ms []acemq.Message[order]) []acemq.Ack { return make([]acemq.Ack, len(ms)) }
	for _, tc := range []struct {
		name   string
		size   int
		window time.Duration
		h      func(context.Context, []acemq.Message[order]) []acemq.Ack
		opts   []acemq.ConsumeOption
		want   string
	}{
		{"nil handler", 3, time.Second, nil, nil, "acemq: ConsumeBatch needs a handler"},
		{"size", 0, time.Second, h, nil, "acemq: ConsumeBatch: a batch size of 0"},
		{"window", 3, 0, h, nil, "acemq: ConsumeBatch: a window of 0s"},
		{"prefetch below size", 3, time.Second, h, []acemq.ConsumeOption{acemq.WithPrefetch(2)}, "acemq: ConsumeBatch: WithPrefetch(2) is below the batch size 3"},
		{"no prefetch limit", 3, time.Second, h, []acemq.ConsumeOption{acemq.WithPrefetch(0)}, "acemq: ConsumeBatch: WithPrefetch(0) (no limit)"},
		{"too many", 1000, time.Second, h, []acemq.ConsumeOption{acemq.WithConcurrency(70)}, "acemq: ConsumeBatch: 70 batches of 1000 messages"},
		{"concurrency", 3, time.Second, h, []acemq.ConsumeOption{acemq.WithConcurrency(0)}, "acemq: WithConcurrency(0)"},
		{"middleware", 3, time.Second, h, []acemq.ConsumeOption{acemq.WithMiddleware(func(h acemq.Handler[order]) acemq.Handler[order] { return h })}, "acemq: ConsumeBatch takes no WithMiddleware"},
		{"order key", 3, time.Second, h, []acemq.ConsumeOption{acemq.WithOrderKey(func(acemq.Message[[]byte]) string { return "" })}, "acemq: ConsumeBatch takes no WithOrderKey"},
		{"unknown type", 3, time.Second, h, []acemq.ConsumeOption{acemq.WithUnknownType(func(context.Context, acemq.Message[[]byte]) acemq.Ack { return acemq.Accept() })}, "acemq: WithUnknownType is for ConsumeTypes, not ConsumeBatch"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := acemq.ConsumeBatch(context.Background(), conn, q, tc.size, tc.window, tc.h, tc.opts...)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
			if c != nil {
				_ = c.Close(context.Background())
			}
		})
	}
}
