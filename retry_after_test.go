package acemq_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/retry"
)

// The handler's own retry delay (RetryAfter) on both brokers: held in the
// consumer below the threshold, unjittered; on the nearest declared rung at
// or above it, or the longest; bounded by the policy's attempts.

func TestRetryAfter(t *testing.T) {
	for _, b := range []backend{memoryBackend, rabbitBackend} {
		t.Run(b.name, func(t *testing.T) {
			t.Run("InConsumer", func(t *testing.T) { testRetryAfterInConsumer(t, b) })
			t.Run("OnRung", func(t *testing.T) { testRetryAfterOnRung(t, b) })
		})
	}
}

func testRetryAfterInConsumer(t *testing.T, b backend) {
	r := newRig(t, b)
	// The policy would wait 10 s ±20 % in the consumer; the handler says 50 ms.
	consume(r, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		if m.Envelope.Attempt() == 1 {
			return acemq.RetryAfter(50*time.Millisecond, errTransient)
		}
		return acemq.Accept()
	}, acemq.WithRetry(retry.Exponential(3, 10*time.Second, time.Minute)))
	env := r.publish("o-1", acemq.Envelope{})
	s := r.byAttempt(2)
	checkSettlement(t, s[0], acemq.DecisionRetry, acemq.OutcomeRetried, r.q)
	if s[0].Where != acemq.WhereConsumer || s[0].Delay != 50*time.Millisecond {
		t.Errorf("the retry waited %v in the %q, want exactly the handler's 50ms in the consumer", s[0].Delay, s[0].Where)
	}
	checkSettlement(t, s[1], acemq.DecisionAccept, acemq.OutcomeAcked, "")
	if s[1].Envelope.Attempt() != 2 || s[1].Envelope.ID() != env.ID() {
		t.Errorf("second delivery attempt %d id %q, want attempt 2 of %q", s[1].Envelope.Attempt(), s[1].Envelope.ID(), env.ID())
	}
}

func testRetryAfterOnRung(t *testing.T, b backend) {
	r := newRig(t, b)
	// Rungs of 1 s and 2 s. 1.5 s rounds up to the 2 s rung; 10 s exceeds
	// them all and takes the longest; the third attempt is the last.
	delays := map[int]time.Duration{1: 1500 * time.Millisecond, 2: 10 * time.Second, 3: time.Second}
	consume(r, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		return acemq.RetryAfter(delays[m.Envelope.Attempt()], errTransient)
	}, acemq.WithRetry(retry.Exponential(3, time.Second, 2*time.Second).WaitInBrokerFrom(time.Second)))
	r.publish("o-2", acemq.Envelope{})
	rung := contract.RungQueue(r.q, 2*time.Second)
	s := r.byAttempt(3)
	for i := range 2 {
		checkSettlement(t, s[i], acemq.DecisionRetry, acemq.OutcomeRetried, rung)
		if s[i].Where != acemq.WhereBroker || s[i].Delay != 2*time.Second {
			t.Errorf("attempt %d: waited %v in the %q, want the 2s rung", i+1, s[i].Delay, s[i].Where)
		}
	}
	checkSettlement(t, s[2], acemq.DecisionRetry, acemq.OutcomeDeadLettered, r.q+".dlq")
	d := r.get(r.q + ".dlq")
	if env := readEnvelope(d); env.Attempt() != 3 {
		t.Errorf("dead-lettered at attempt %d, want 3", env.Attempt())
	}
}

func TestRetryAfterFatalRejects(t *testing.T) {
	a := acemq.RetryAfter(time.Second, acemq.Fatal(errTransient))
	if a.Decision() != acemq.DecisionReject || !errors.Is(a.Err(), errTransient) {
		t.Errorf("RetryAfter with a fatal error = %v, want a reject", a)
	}
	a = acemq.RetryAfter(-time.Second, nil)
	if a.Decision() != acemq.DecisionRetry || a.Delay() != 0 || a.Err() == nil {
		t.Errorf("RetryAfter(-1s, nil) = %v delay %v, want a retry at once with a reason", a, a.Delay())
	}
}
