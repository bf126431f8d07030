package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/retry"
)

var errDownstream = errors.New("the stock service is down")

// TestBreakerOpensAndCloses: a downstream that fails opens the breaker
// after three failures in a row; while it is open nothing is retried or
// dead-lettered (failures are put back unchanged); once the downstream
// recovers, a probe closes the breaker and every message is accepted.
func TestBreakerOpensAndCloses(t *testing.T) {
	for _, concurrency := range []int{1, 4} {
		t.Run(fmt.Sprintf("concurrency %d", concurrency), func(t *testing.T) { testBreakerOpensAndCloses(t, concurrency) })
	}
}

func testBreakerOpensAndCloses(t *testing.T, concurrency int) {
	brokertest.Each(t, func(t *testing.T, url string) {
		x := newTel(t)
		r := newPipeRig(t, url, x.options()...)
		var down atomic.Bool
		down.Store(true)
		var mu sync.Mutex
		accepted := map[string]int{}
		k := r.consume(func(_ context.Context, m acemq.Message[string]) acemq.Ack {
			if down.Load() {
				return acemq.Retry(errDownstream)
			}
			mu.Lock()
			accepted[m.Envelope.ID()]++
			mu.Unlock()
			return acemq.Accept()
		},
			acemq.WithRetry(retry.Fixed(5, time.Millisecond)),
			acemq.WithBreaker(acemq.Breaker{ConsecutiveFailures: 3, CoolDown: 20 * time.Millisecond}),
			acemq.WithConcurrency(concurrency),
		)
		const n = 10
		sent := map[string]bool{}
		for range n {
			sent[r.send("order").ID()] = true
		}
		// The third failure opens the breaker and is put back.
		testenv.Eventually(t, "a delivery put back by the open breaker", func() bool {
			for _, s := range r.rec.All() {
				if s.Outcome == acemq.OutcomeRequeued && strings.HasPrefix(s.Reason, "the circuit breaker is open: Error: the stock service is down") {
					return true
				}
			}
			return false
		})
		if st := k.Breaker(); st == acemq.BreakerClosed {
			t.Errorf("the breaker is %s while the downstream is down", st)
		}
		rep := r.c.Health(context.Background())
		if rep.Status != acemq.HealthDegraded || rep.Parts["breakers"].(map[string]string)[r.q] == "closed" || !strings.Contains(rep.Detail, "circuit breaker") {
			t.Errorf("health with an open breaker: %+v", rep)
		}
		if g := x.count(t, "acemq.consume.breaker.state", map[string]string{"queue": r.q}); g == 0 {
			t.Errorf("acemq.consume.breaker.state is %d (closed) while the breaker is open", g)
		}
		if c := x.count(t, "acemq.consume.breaker.opened", map[string]string{"queue": r.q}); c < 1 {
			t.Errorf("acemq.consume.breaker.opened is %d", c)
		}
		// The downstream recovers: a probe closes the breaker.
		down.Store(false)
		testenv.Eventually(t, "every message accepted", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(accepted) == n
		})
		testenv.Eventually(t, "the breaker closed", func() bool { return k.Breaker() == acemq.BreakerClosed })
		mu.Lock()
		for id, times := range accepted {
			if !sent[id] || times != 1 {
				t.Errorf("message %s accepted %d times", id, times)
			}
		}
		mu.Unlock()
		retried := 0
		for _, s := range r.rec.All() {
			switch s.Outcome {
			case acemq.OutcomeDeadLettered, acemq.OutcomeRejected, acemq.OutcomeParked:
				t.Errorf("settled %s while the breaker guarded the consumer: %+v", s.Outcome, s)
			case acemq.OutcomeRetried:
				retried++
			}
		}
		// Only the two failures before the breaker opened spent an attempt.
		if retried != 2 {
			t.Errorf("%d retries; want the 2 before the breaker opened", retried)
		}
		if d := brokertest.Depth(t, r.c, contract.DeadLetterQueue(r.q)); d != 0 {
			t.Errorf("%d messages dead-lettered", d)
		}
		if g := x.count(t, "acemq.consume.breaker.state", map[string]string{"queue": r.q}); g != 0 {
			t.Errorf("acemq.consume.breaker.state is %d after the breaker closed", g)
		}
		if rep := r.c.Health(context.Background()); rep.Status != acemq.HealthUp {
			t.Errorf("health after the breaker closed: %+v", rep)
		}
	})
}

// TestBreakerFailureRate: the breaker opens on a share of failures over a
// window, and IsFailure decides what counts.
func TestBreakerFailureRate(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newPipeRig(t, url)
		release := make(chan struct{})
		k := r.consume(func(_ context.Context, m acemq.Message[string]) acemq.Ack {
			switch m.Payload {
			case "ok":
				return acemq.Accept()
			case "other":
				return acemq.Retry(errors.New("not the downstream"))
			}
			select {
			case <-release:
				return acemq.Accept()
			default:
				return acemq.Retry(errDownstream)
			}
		},
			acemq.WithBreaker(acemq.Breaker{
				FailureRate: 0.5, Window: 4, CoolDown: 20 * time.Millisecond,
				IsFailure: func(err error) bool { return errors.Is(err, errDownstream) },
			}),
		)
		// ok, other (not counted), down, ok, down: 2 failures of the last
		// 4 counted results open it on the last one, which is put back.
		// (Without a retry policy the first failures are dead-lettered.)
		for i, b := range []string{"ok", "other", "down", "ok", "down"} {
			r.send(b)
			r.rec.Wait(t, i+1)
		}
		if s := r.rec.All()[4]; s.Outcome != acemq.OutcomeRequeued {
			t.Fatalf("the fifth result did not open the breaker: %+v", s)
		}
		close(release)
		testenv.Eventually(t, "the breaker closed and everything accepted", func() bool {
			return k.Breaker() == acemq.BreakerClosed && brokertest.Depth(t, r.c, r.q) == 0 && k.InFlight() == 0 && r.rec.Count(acemq.OutcomeAcked) == 3
		})
	})
}

func TestBreakerOptionsAreChecked(t *testing.T) {
	c := brokertest.Connect(t, brokertest.MemoryURL(t))
	q := brokertest.Queue(t, c, "acemq.pipe")
	h := func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() }
	for _, tc := range []struct {
		b    acemq.Breaker
		want string
	}{
		{acemq.Breaker{CoolDown: time.Second}, "without either the breaker never opens"},
		{acemq.Breaker{ConsecutiveFailures: 3}, "CoolDown is 0s; it must be positive"},
		{acemq.Breaker{ConsecutiveFailures: -1, CoolDown: time.Second}, "ConsecutiveFailures is -1"},
		{acemq.Breaker{FailureRate: 1.5, Window: 3, CoolDown: time.Second}, "FailureRate is 1.5"},
		{acemq.Breaker{FailureRate: 0.5, CoolDown: time.Second}, "needs a Window"},
	} {
		k, err := acemq.Consume(context.Background(), c, q, h, acemq.WithBreaker(tc.b))
		if err == nil {
			brokertest.Stop(t, k)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("WithBreaker(%+v): %v, want %q", tc.b, err, tc.want)
		}
	}
}

// TestBreakerAndPauseTogether: a consumer the application paused stays
// paused when its breaker's cool-down ends, and one whose breaker is open
// stays paused when the application resumes it.
func TestBreakerAndPauseTogether(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newPipeRig(t, url)
		var down atomic.Bool
		down.Store(true)
		k := r.consume(func(context.Context, acemq.Message[string]) acemq.Ack {
			if down.Load() {
				return acemq.Retry(errDownstream)
			}
			return acemq.Accept()
		},
			acemq.WithRetry(retry.Fixed(5, time.Millisecond)),
			acemq.WithBreaker(acemq.Breaker{ConsecutiveFailures: 1, CoolDown: time.Hour}),
		)
		r.send("x")
		testenv.Eventually(t, "the breaker open", func() bool { return k.Breaker() == acemq.BreakerOpen })
		ctx := context.Background()
		if err := k.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		if err := k.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		// The breaker still holds it: the message stays on the queue.
		testenv.Eventually(t, "the message back on the queue", func() bool { return brokertest.Depth(t, r.c, r.q) == 1 })
		if !k.Paused() {
			t.Errorf("a consumer with an open breaker is not paused after Resume")
		}
	})
}
