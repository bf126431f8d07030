package replay_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/replay"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/route"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// declareQueues declares {q}, {q}.dlq and {q}.parked (durable, classic), deleted
// when the test ends, and returns q.
func declareQueues(t *testing.T, c *acemq.Conn) string {
	t.Helper()
	q := brokertest.Queue(t, c, "rp")
	for _, n := range []string{contract.DeadLetterQueue(q), contract.ParkedQueue(q)} {
		if _, err := brokertest.Driver(c).DeclareQueue(context.Background(), driver.Queue{Name: n, Durable: true}); err != nil {
			t.Fatal(err)
		}
	}
	return q
}

// deadLetter puts a message straight into queue, as a set-aside would.
func deadLetter(t *testing.T, c *acemq.Conn, queue string, env acemq.Envelope, body string) {
	t.Helper()
	err := brokertest.Publish(context.Background(), c, brokertest.Outbound{Exchange: "", RoutingKey: queue, Envelope: env, ContentType: "text/plain; charset=utf-8", Body: []byte(body)})
	if err != nil {
		t.Fatal(err)
	}
}

// waitCount polls until queue holds want messages (the broker settles
// requeues asynchronously) and fails the test if it never does.
func waitCount(t *testing.T, c *acemq.Conn, queue string, want int) {
	t.Helper()
	testenv.Eventually(t, fmt.Sprintf("%s to hold %d messages", queue, want), func() bool {
		return brokertest.Depth(t, c, queue) == want
	})
}

func getAll(t *testing.T, c *acemq.Conn, queue string) []driver.Delivery {
	t.Helper()
	var out []driver.Delivery
	for {
		d, ok, err := brokertest.Driver(c).Get(context.Background(), queue)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		_ = d.Ack()
		out = append(out, d)
	}
}

func TestReplayMovesAndStamps(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := declareQueues(t, c)
		firstSeen := time.Date(2026, 1, 2, 3, 4, 5, 678_000_000, time.UTC)
		env := acemq.MustEnvelope(acemq.Fields{
			ID: "11111111-2222-3333-4444-555555555555", Type: "order.placed", CorrelationID: "corr-1", CausationID: "cause-1",
			Attempt: 3, FirstSeen: firstSeen, Origin: "orders@host-7", Reason: "exhausted 3 attempts: errorString: boom",
			Claim: "s3://payloads/o-1", Route: []string{"a", "b"}, RoutePosition: 1, RouteID: "run-1",
			Headers: map[string]any{"x-tenant": "acme", "acemq-replay-count": int32(1), "x-death": []any{driver.Table{"count": int64(1)}}},
		})
		// An unknown reserved header from a newer sibling rides along, as read off the wire.
		wireHeaders := env.AppendHeaders(nil, "orders.new")
		wireHeaders["x-acemq-future"] = "from-a-newer-sibling"
		env = acemq.ReadEnvelope(wireHeaders, "orders.new", env.ID())
		deadLetter(t, c, contract.DeadLetterQueue(q), env, "payload-1")

		before := time.Now().Add(-time.Second)
		res, err := replay.Run(context.Background(), c, contract.DeadLetterQueue(q))
		if err != nil {
			t.Fatal(err)
		}
		if res.Moved != 1 || res.Skipped != 0 || res.Reason != replay.Drained || res.RoutingKey != q || res.Exchange != "" {
			t.Fatalf("result %v", res)
		}
		got := getAll(t, c, q)
		if len(got) != 1 {
			t.Fatalf("%d messages on the target", len(got))
		}
		d := got[0]
		if string(d.Body) != "payload-1" || d.ContentType != "text/plain; charset=utf-8" || d.MessageID != env.ID() || !d.Persistent {
			t.Fatalf("body %q content type %q message-id %q persistent %t", d.Body, d.ContentType, d.MessageID, d.Persistent)
		}
		h := d.Headers
		if _, ok := h[wire.HeaderError]; ok {
			t.Fatal("x-acemq-error survived the replay")
		}
		n, _ := h[wire.HeaderAttempt].(int32)
		if n != 1 {
			t.Fatalf("attempt %#v, want 1", h[wire.HeaderAttempt])
		}
		if h["acemq-replayed-from"] != contract.DeadLetterQueue(q) {
			t.Fatalf("acemq-replayed-from %v", h["acemq-replayed-from"])
		}
		at, err := time.Parse(replay.ReplayedAtLayout, fmt.Sprint(h["acemq-replayed-at"]))
		if err != nil || at.Before(before) || at.After(time.Now().Add(time.Second)) {
			t.Fatalf("acemq-replayed-at %v (%v)", h["acemq-replayed-at"], err)
		}
		if fmt.Sprint(h["acemq-replay-count"]) != "2" {
			t.Fatalf("acemq-replay-count %#v, want 2", h["acemq-replay-count"])
		}
		read := acemq.ReadEnvelope(h, d.RoutingKey, d.MessageID)
		if read.ID() != env.ID() || read.Type() != "order.placed" || read.CorrelationID() != "corr-1" || read.CausationID() != "cause-1" ||
			!read.FirstSeen().Equal(firstSeen) || read.Origin() != "orders@host-7" || read.Claim() != "s3://payloads/o-1" {
			t.Fatalf("envelope changed: %+v", read.Fields())
		}
		if strings.Join(read.Fields().Route, ",") != "a,b" || read.Fields().RoutePosition != 1 || read.Fields().RouteID != "run-1" {
			t.Fatalf("route %v %d %q", read.Fields().Route, read.Fields().RoutePosition, read.Fields().RouteID)
		}
		if h["x-acemq-future"] != "from-a-newer-sibling" || h["x-tenant"] != "acme" {
			t.Fatalf("headers lost: %v", h)
		}
		if _, ok := h["x-death"]; !ok {
			t.Fatal("x-death was dropped")
		}
		waitCount(t, c, contract.DeadLetterQueue(q), 0)
	})
}

// TestReplayUntypedMessage: a dead letter that arrived without an
// x-acemq-type (a broker dead-lettering of a foreign message) is typed by
// its new routing key when it moves, not by the dead-letter queue's name;
// its reply-to and correlation-id properties move with it.
func TestReplayUntypedMessage(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := declareQueues(t, c)
		dlq := contract.DeadLetterQueue(q)
		if err := brokertest.Driver(c).Publish(context.Background(), driver.Message{
			RoutingKey: dlq, Mandatory: true, MessageID: "foreign-1", ReplyTo: "answers", CorrelationID: "c-9",
			Headers: driver.Table{"x-tenant": "acme"}, Body: []byte("x"),
		}); err != nil {
			t.Fatal(err)
		}
		if res, err := replay.Run(context.Background(), c, dlq); err != nil || res.Moved != 1 {
			t.Fatalf("replay: %v, %v", res, err)
		}
		got := getAll(t, c, q)
		if len(got) != 1 {
			t.Fatalf("%d messages on the target", len(got))
		}
		d := got[0]
		if typ := d.Headers[wire.HeaderType]; typ != q {
			t.Errorf("an untyped message moved to %s is typed %v, want %q", q, typ, q)
		}
		if d.ReplyTo != "answers" || d.CorrelationID != "c-9" || d.MessageID != "foreign-1" || d.Headers["x-tenant"] != "acme" {
			t.Errorf("reply-to %q, correlation-id %q, message-id %q, headers %v: not carried", d.ReplyTo, d.CorrelationID, d.MessageID, d.Headers)
		}
	})
}

func TestReplayFromParkedAndToAnExchange(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := declareQueues(t, c)
		deadLetter(t, c, contract.ParkedQueue(q), acemq.MustEnvelope(acemq.Fields{Reason: "the handler parked it: x"}), "p-1")
		res, err := replay.Run(context.Background(), c, contract.ParkedQueue(q))
		if err != nil || res.Moved != 1 || res.RoutingKey != q {
			t.Fatalf("%v, %v", res, err)
		}
		waitCount(t, c, q, 1)

		ex := testenv.Unique(t, "rp")
		other := declareQueues(t, c)
		if err := brokertest.Driver(c).DeclareExchange(context.Background(), driver.Exchange{Name: ex, Kind: driver.Direct, Durable: true}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = brokertest.Driver(c).DeleteExchange(context.Background(), ex) })
		if err := brokertest.Driver(c).Bind(context.Background(), driver.Binding{Exchange: ex, Queue: other, RoutingKey: "order.retry"}); err != nil {
			t.Fatal(err)
		}
		deadLetter(t, c, contract.DeadLetterQueue(q), acemq.MustEnvelope(acemq.Fields{}), "d-1")
		res, err = replay.Run(context.Background(), c, contract.DeadLetterQueue(q), replay.WithTarget(ex, "order.retry"))
		if err != nil || res.Moved != 1 || res.Exchange != ex {
			t.Fatalf("%v, %v", res, err)
		}
		got := getAll(t, c, other)
		if len(got) != 1 || string(got[0].Body) != "d-1" || got[0].Exchange != ex || got[0].RoutingKey != "order.retry" {
			t.Fatalf("target got %d messages", len(got))
		}
	})
}

func fill(t *testing.T, c *acemq.Conn, queue string, n int) {
	t.Helper()
	for i := range n {
		env := acemq.MustEnvelope(acemq.Fields{Type: []string{"keep", "drop"}[i%2], Reason: "the handler rejected it: no"})
		deadLetter(t, c, queue, env, fmt.Sprintf("m-%d", i))
	}
	waitCount(t, c, queue, n)
}

func TestReplayLimit(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := declareQueues(t, c)
		dlq := contract.DeadLetterQueue(q)
		fill(t, c, dlq, 10)
		res, err := replay.Run(context.Background(), c, dlq, replay.WithLimit(4))
		if err != nil || res.Moved != 4 || res.Reason != replay.LimitReached {
			t.Fatalf("%v, %v", res, err)
		}
		waitCount(t, c, q, 4)
		waitCount(t, c, dlq, 6)
	})
}

// A replay interrupted half-way loses nothing: every message is either
// still in the dead-letter queue or on the target.
func TestReplayInterruptedLosesNothing(t *testing.T) {
	for _, reason := range []replay.Reason{replay.Cancelled, replay.DeadlineExceeded} {
		t.Run(string(reason), func(t *testing.T) {
			brokertest.Each(t, func(t *testing.T, url string) {
				c := brokertest.Connect(t, url)
				q := declareQueues(t, c)
				dlq := contract.DeadLetterQueue(q)
				const total = 10
				fill(t, c, dlq, total)
				var calls atomic.Int32
				ctx, cancel := context.WithCancel(context.Background())
				defer cancel()
				var runCtx context.Context = ctx
				if reason == replay.DeadlineExceeded {
					// A deadline that passes while the fifth message is in hand.
					runCtx = &deadlineAfter{Context: ctx, n: &calls, after: 5}
				}
				res, err := replay.Run(runCtx, c, dlq, replay.WithFilter(func(acemq.Envelope) bool {
					if calls.Add(1) == 5 && reason == replay.Cancelled {
						cancel()
					}
					return true
				}))
				if err != nil {
					t.Fatal(err)
				}
				if res.Reason != reason {
					t.Fatalf("reason %q, want %q (%v)", res.Reason, reason, res)
				}
				if res.Moved < 4 || res.Moved > 5 {
					t.Fatalf("moved %d, want 4 (5 if the fifth publish beat the interruption)", res.Moved)
				}
				waitCount(t, c, q, res.Moved)
				waitCount(t, c, dlq, total-res.Moved)
			})
		})
	}
}

// deadlineAfter is a context whose deadline has passed once n reaches after:
// a deadline that expires half-way through a replay, deterministically.
type deadlineAfter struct {
	context.Context
	n     *atomic.Int32
	after int32
}

func (d *deadlineAfter) Err() error {
	if d.n.Load() >= d.after {
		return context.DeadlineExceeded
	}
	return d.Context.Err()
}

func (d *deadlineAfter) Done() <-chan struct{} {
	if d.n.Load() >= d.after {
		ch := make(chan struct{})
		close(ch)
		return ch
	}
	return d.Context.Done()
}

func TestReplayFilterHoldsDeclinedMessagesUntilTheEnd(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := declareQueues(t, c)
		dlq := contract.DeadLetterQueue(q)
		fill(t, c, dlq, 6)
		var calls atomic.Int32
		res, err := replay.Run(context.Background(), c, dlq, replay.WithFilter(func(env acemq.Envelope) bool {
			calls.Add(1)
			return env.Type() == "keep"
		}))
		if err != nil || res.Moved != 3 || res.Skipped != 3 || res.Reason != replay.Drained {
			t.Fatalf("%v, %v", res, err)
		}
		if calls.Load() != 6 {
			t.Fatalf("the filter saw %d messages, want 6 (declined ones must not be fetched again)", calls.Load())
		}
		waitCount(t, c, q, 3)
		waitCount(t, c, dlq, 3)
		for _, d := range getAll(t, c, dlq) {
			if env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID); env.Type() != "drop" || env.Reason() == "" {
				t.Fatalf("a declined message changed: type %q error %q", env.Type(), env.Reason())
			}
		}
	})
}

func TestReplayToAMissingTargetPutsTheMessageBack(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := declareQueues(t, c)
		dlq := contract.DeadLetterQueue(q)
		fill(t, c, dlq, 3)
		res, err := replay.Run(context.Background(), c, dlq, replay.WithTarget("", testenv.Unique(t, "rp")+"-missing"))
		var ue *driver.ReturnError
		if res.Reason != replay.Failed || !errors.As(err, &ue) || !errors.Is(res.Err, err) || res.Moved != 0 {
			t.Fatalf("%v, %v", res, err)
		}
		waitCount(t, c, dlq, 3)
	})
}

// A replay's publishes are confirmed even when the connection's are not:
// without the confirm (and its return) an unroutable move would be acked
// away and lost.
func TestReplayConfirmsOnAConnectionWithoutConfirms(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url, acemq.WithConfirms(false))
		q := declareQueues(t, c)
		dlq := contract.DeadLetterQueue(q)
		fill(t, c, dlq, 2)
		res, err := replay.Run(context.Background(), c, dlq, replay.WithTarget("", testenv.Unique(t, "rp")+"-missing"))
		var ue *driver.ReturnError
		if res.Reason != replay.Failed || !errors.As(err, &ue) {
			t.Fatalf("%v, %v", res, err)
		}
		waitCount(t, c, dlq, 2)
		res, err = replay.Run(context.Background(), c, dlq)
		if err != nil || res.Moved != 2 {
			t.Fatalf("%v, %v", res, err)
		}
		waitCount(t, c, q, 2)
	})
}

func TestReplayRefusesBadArguments(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		if _, err := replay.Run(context.Background(), c, "orders.new"); err == nil {
			t.Fatal("a source without .dlq or .parked and no target was accepted")
		}
		if _, err := replay.Run(context.Background(), c, "x.dlq", replay.WithLimit(-1)); err == nil {
			t.Fatal("a negative limit was accepted")
		}
		res, err := replay.Run(context.Background(), c, testenv.Unique(t, "rp")+".dlq")
		if err == nil || res.Reason != replay.Failed {
			t.Fatalf("a missing source: %v, %v", res, err)
		}
		ctx, cancel := context.WithTimeout(context.Background(), -time.Second)
		defer cancel()
		q := declareQueues(t, c)
		if res, err := replay.Run(ctx, c, contract.DeadLetterQueue(q)); err != nil || res.Reason != replay.DeadlineExceeded {
			t.Fatalf("an expired deadline: %v, %v", res, err)
		}
	})
}

func TestKeepAttempts(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := declareQueues(t, c)
		deadLetter(t, c, contract.DeadLetterQueue(q), acemq.MustEnvelope(acemq.Fields{Attempt: 5}), "x")
		if _, err := replay.Run(context.Background(), c, contract.DeadLetterQueue(q), replay.WithKeptAttempts()); err != nil {
			t.Fatal(err)
		}
		got := getAll(t, c, q)
		if len(got) != 1 || acemq.ReadEnvelope(got[0].Headers, "", "").Attempt() != 5 {
			t.Fatalf("attempt not kept: %v", got)
		}
	})
}

type Order struct {
	ID string `json:"id"`
}

// A three-step pipeline whose second step fails until it is fixed: the run
// dead-letters at step two, is replayed after the fix, resumes at step two
// and finishes at step three with its original run id.
func TestReplayResumesAPipelineRun(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		ctx := context.Background()
		p, err := route.NewPipeline(c, testenv.Unique(t, "rp"), []string{"one", "two", "three"})
		if err != nil {
			t.Fatal(err)
		}
		if err := p.Declare(ctx); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			for _, s := range p.Steps() {
				for _, n := range []string{p.Queue(s), contract.DeadLetterQueue(p.Queue(s)), contract.ParkedQueue(p.Queue(s))} {
					_, _ = brokertest.Driver(c).DeleteQueue(context.Background(), n)
				}
			}
			_ = brokertest.Driver(c).DeleteExchange(context.Background(), p.Name())
		})
		var fixed atomic.Bool
		var runsAtTwo atomic.Int32
		finished := make(chan acemq.Message[Order], 1)
		handlers := map[string]route.Handler[Order, Order]{
			"one": func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
				return route.Forward(m.Payload), nil
			},
			"two": func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
				runsAtTwo.Add(1)
				if !fixed.Load() {
					return route.Output[Order]{}, errors.New("the warehouse service is down")
				}
				return route.Forward(m.Payload), nil
			},
			"three": func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
				select {
				case finished <- m:
				default:
				}
				return route.Forward(m.Payload), nil
			},
		}
		var consumers []*acemq.Consumer
		for _, s := range p.Steps() {
			cons, err := route.Step(ctx, p, s, handlers[s], acemq.WithRetry(retry.Fixed(2, 10*time.Millisecond)))
			if err != nil {
				t.Fatal(err)
			}
			consumers = append(consumers, cons)
		}
		defer func() {
			for _, cons := range consumers {
				ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
				_ = cons.Close(ctx)
				cancel()
			}
		}()

		runID, err := p.Start(ctx, Order{ID: "o-1"})
		if err != nil {
			t.Fatal(err)
		}
		dlq := contract.DeadLetterQueue(p.Queue("two"))
		waitCount(t, c, dlq, 1)
		if runsAtTwo.Load() != 2 {
			t.Fatalf("step two ran %d times before giving up, want 2", runsAtTwo.Load())
		}
		select {
		case <-finished:
			t.Fatal("the run finished although step two failed")
		default:
		}

		fixed.Store(true)
		res, err := replay.Run(ctx, c, dlq)
		if err != nil || res.Moved != 1 || res.RoutingKey != p.Queue("two") {
			t.Fatalf("%v, %v", res, err)
		}
		var m acemq.Message[Order]
		select {
		case m = <-finished:
		case <-time.After(15 * time.Second):
			t.Fatal("the replayed run did not finish")
		}
		if m.Envelope.Fields().RouteID != runID || m.Envelope.Fields().RoutePosition != 2 || m.Payload.ID != "o-1" {
			t.Fatalf("finished run %q at position %d, want run %q at 2", m.Envelope.Fields().RouteID, m.Envelope.Fields().RoutePosition, runID)
		}
		if m.Envelope.Attempt() != 1 {
			t.Fatalf("the last hop is on attempt %d", m.Envelope.Attempt())
		}
		if runsAtTwo.Load() != 3 {
			t.Fatalf("step two ran %d times, want 3 (it resumed, it did not restart)", runsAtTwo.Load())
		}
		waitCount(t, c, dlq, 0)
	})
}

// WithMessageFilter sees each message's body, and holds what it declines
// until the end like WithFilter.
func TestReplayMessageFilterSeesTheBody(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := declareQueues(t, c)
		dlq := contract.DeadLetterQueue(q)
		fill(t, c, dlq, 4) // bodies m-0 … m-3
		var seen []string
		res, err := replay.Run(context.Background(), c, dlq, replay.WithMessageFilter(func(m acemq.Message[[]byte]) bool {
			seen = append(seen, string(m.Body))
			return string(m.Body) != "m-1"
		}))
		if err != nil || res.Moved != 3 || res.Skipped != 1 || res.Reason != replay.Drained {
			t.Fatalf("%v, %v", res, err)
		}
		if len(seen) != 4 {
			t.Fatalf("the filter saw %q, want the four bodies once each", seen)
		}
		waitCount(t, c, q, 3)
		waitCount(t, c, dlq, 1)
		if d := getAll(t, c, dlq); len(d) != 1 || string(d[0].Body) != "m-1" {
			t.Fatalf("left on the source: %v", d)
		}
	})
}
