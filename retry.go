package acemq

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/wire"
)

// defaultBrokerWaitThreshold is the wait from which a retry is held on a
// broker rung queue instead of in the consumer.
const defaultBrokerWaitThreshold = 30 * time.Second

// RetryPolicy says how many times a message is attempted, how long to wait
// between attempts, where the wait happens, and when to give up on age
// (docs/wire.md §7). Build one with NoRetry, FixedRetry or ExponentialRetry
// and the modifiers; the zero RetryPolicy is NoRetry. It is a value;
// modifiers return copies. String renders it in the family's notation.
//
// A policy built with nonsensical values — fewer than one attempt, a
// negative delay, a cap below the first delay, a negative age limit or
// threshold, a jitter outside [0, 1] — keeps the first mistake and is
// refused by Consume and topology.Topology.Queue (WithRetry), with an error saying
// what to change.
type RetryPolicy struct {
	maxAttempts int
	initial     time.Duration
	multiplier  float64
	maxDelay    time.Duration
	maxAge      time.Duration
	jitter      float64
	threshold   time.Duration
	built       bool
	err         error // the first nonsensical value it was given
}

// NoRetry is one attempt: a retry request dead-letters at once. It is the
// default policy.
func NoRetry() RetryPolicy {
	return RetryPolicy{maxAttempts: 1, multiplier: 1, threshold: defaultBrokerWaitThreshold, built: true}
}

// FixedRetry makes n attempts in all (the first included), waiting d before
// each retry, without jitter. n must be at least 1 (1 is NoRetry) and d
// must not be negative.
func FixedRetry(n int, d time.Duration) RetryPolicy {
	p := RetryPolicy{maxAttempts: n, initial: d, multiplier: 1, maxDelay: d, threshold: defaultBrokerWaitThreshold, built: true}
	switch {
	case n < 1:
		p = p.failf("FixedRetry(%d, %s): the number of attempts includes the first, so it must be at least 1 (1 is NoRetry)", n, d)
	case d < 0:
		p = p.failf("FixedRetry(%d, %s): the delay must not be negative", n, d)
	}
	return p.fix()
}

// ExponentialRetry makes n attempts in all (the first included), waiting
// initial before the second and doubling each time, capped at maxDelay, with
// ±20 % jitter on waits held in the consumer (waits held on a broker rung are
// never jittered). n must be at least 1, initial must not be negative and
// maxDelay must not be below initial.
func ExponentialRetry(n int, initial, maxDelay time.Duration) RetryPolicy {
	p := RetryPolicy{maxAttempts: n, initial: initial, multiplier: 2, maxDelay: maxDelay, jitter: defaultExponentialJitter, threshold: defaultBrokerWaitThreshold, built: true}
	switch {
	case n < 1:
		p = p.failf("ExponentialRetry(%d, %s, %s): the number of attempts includes the first, so it must be at least 1 (1 is NoRetry)", n, initial, maxDelay)
	case initial < 0:
		p = p.failf("ExponentialRetry(%d, %s, %s): the first delay must not be negative", n, initial, maxDelay)
	case maxDelay < initial:
		p = p.failf("ExponentialRetry(%d, %s, %s): the cap on a delay (%s) is below the first delay (%s); give a cap at least as large", n, initial, maxDelay, maxDelay, initial)
	}
	return p.fix()
}

// failf records the policy's first mistake.
func (p RetryPolicy) failf(format string, args ...any) RetryPolicy {
	if p.err == nil {
		p.err = fmt.Errorf(format, args...)
	}
	return p
}

// Err is the first nonsensical value the policy was built with, or nil.
func (p RetryPolicy) Err() error {
	if p.err == nil {
		return nil
	}
	return fmt.Errorf("acemq: %w", p.err)
}

// defaultExponentialJitter is the jitter factor ExponentialRetry starts with.
const defaultExponentialJitter = 0.2

func (p RetryPolicy) fix() RetryPolicy {
	p.maxAttempts = max(p.maxAttempts, 1)
	p.initial = max(p.initial, 0)
	p.maxDelay = max(p.maxDelay, p.initial)
	return p
}

func (p RetryPolicy) orDefault() RetryPolicy {
	if !p.built {
		return NoRetry()
	}
	return p
}

// GiveUpAfter returns a copy that stops retrying once a message's age (since
// it was first published) reaches age; 0 means no limit. An unknown age
// never stops it. age must not be negative.
func (p RetryPolicy) GiveUpAfter(age time.Duration) RetryPolicy {
	p = p.orDefault()
	if age < 0 {
		p = p.failf("GiveUpAfter(%s): the age limit must not be negative (0 means no limit)", age)
	}
	p.maxAge = max(age, 0)
	return p
}

// Jitter returns a copy whose consumer waits land uniformly in
// [d×(1−f), d×(1+f)]. f must be in [0, 1].
func (p RetryPolicy) Jitter(f float64) RetryPolicy {
	p = p.orDefault()
	if !(f >= 0 && f <= 1) {
		p = p.failf("Jitter(%g): the jitter factor must be between 0 (none) and 1", f)
	}
	p.jitter = math.Min(math.Max(f, 0), 1)
	if math.IsNaN(p.jitter) {
		p.jitter = 0
	}
	return p
}

// WaitInBrokerFrom returns a copy whose waits at or above t are held on a
// broker rung queue; 0 keeps every wait in the consumer. t must not be
// negative. The default is 30 s.
func (p RetryPolicy) WaitInBrokerFrom(t time.Duration) RetryPolicy {
	p = p.orDefault()
	if t < 0 {
		p = p.failf("WaitInBrokerFrom(%s): the threshold must not be negative (0 keeps every wait in the consumer)", t)
	}
	p.threshold = max(t, 0)
	return p
}

// plan is the policy as the consume engine runs it (the zero policy is
// NoRetry's).
func (p RetryPolicy) plan() engine.Policy {
	p = p.orDefault()
	return engine.Policy{MaxAttempts: p.maxAttempts, Initial: p.initial, Multiplier: p.multiplier, MaxDelay: p.maxDelay,
		MaxAge: p.maxAge, Jitter: p.jitter, Threshold: p.threshold}
}

// Schedule is the unjittered wait before each retry: entry i is the wait
// before attempt i+2, min(initial × multiplier^i, max).
func (p RetryPolicy) Schedule() []time.Duration { return p.plan().Schedule() }

// delayAfter is the unjittered wait after a failed attempt (1-based) before
// the next one.
func (p RetryPolicy) delayAfter(attempt int) time.Duration { return p.plan().DelayAfter(attempt) }

// waitsInBroker reports whether a wait of d is held on a broker rung.
func (p RetryPolicy) waitsInBroker(d time.Duration) bool { return p.plan().WaitsInBroker(d) }

// brokerRungs are the distinct scheduled waits held on rungs, ascending.
func (p RetryPolicy) brokerRungs() []time.Duration { return p.plan().BrokerRungs() }

// shouldRetry reports whether a message that failed on attempt (1-based),
// with the given age, is tried again.
func (p RetryPolicy) shouldRetry(attempt int, age time.Duration, ageKnown bool) bool {
	return p.plan().ShouldRetry(attempt, age, ageKnown)
}

// jittered returns the wait actually spent in the consumer for a scheduled
// wait d.
func (p RetryPolicy) jittered(d time.Duration) time.Duration { return p.plan().Jittered(d) }

// String renders the policy in the family's notation, for example
// "exponential(6, 10s, 1m).giveUpAfter(2m)"; modifiers that differ from the
// factory's defaults are appended (.withJitter, .waitInBrokerFrom).
func (p RetryPolicy) String() string {
	p = p.orDefault()
	var s string
	var jitter float64
	switch {
	case p.maxAttempts == 1 && p.initial == 0:
		s = "none()"
	case p.multiplier == 1:
		s = fmt.Sprintf("fixed(%d, %s)", p.maxAttempts, wire.FormatDelay(p.initial))
	default:
		s = fmt.Sprintf("exponential(%d, %s, %s)", p.maxAttempts, wire.FormatDelay(p.initial), wire.FormatDelay(p.maxDelay))
		jitter = defaultExponentialJitter
	}
	if p.maxAge > 0 {
		s += ".giveUpAfter(" + wire.FormatDelay(p.maxAge) + ")"
	}
	if p.jitter != jitter {
		s += ".withJitter(" + strconv.FormatFloat(p.jitter, 'g', -1, 64) + ")"
	}
	if p.threshold != defaultBrokerWaitThreshold {
		s += ".waitInBrokerFrom(" + wire.FormatDelay(p.threshold) + ")"
	}
	return s
}

// chosenDelay is where a handler-chosen retry delay d (RetryAfter) waits
// (engine.Policy.ChosenDelay).
func (p RetryPolicy) chosenDelay(d time.Duration) (wait time.Duration, inBroker bool) {
	return p.plan().ChosenDelay(d)
}
