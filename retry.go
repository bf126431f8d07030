package acemq

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"

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

// Schedule is the unjittered wait before each retry: entry i is the wait
// before attempt i+2, min(initial × multiplier^i, max).
func (p RetryPolicy) Schedule() []time.Duration {
	p = p.orDefault()
	out := make([]time.Duration, 0, max(p.maxAttempts-1, 0))
	for i := 0; i < p.maxAttempts-1; i++ {
		out = append(out, p.delay(i))
	}
	return out
}

func (p RetryPolicy) delay(i int) time.Duration {
	d := float64(p.initial) * math.Pow(p.multiplier, float64(i))
	if d >= float64(p.maxDelay) || math.IsInf(d, 0) {
		return p.maxDelay
	}
	return time.Duration(d)
}

// delayAfter is the unjittered wait after a failed attempt (1-based) before
// the next one.
func (p RetryPolicy) delayAfter(attempt int) time.Duration {
	p = p.orDefault()
	return p.delay(max(attempt-1, 0))
}

// waitsInBroker reports whether a wait of d is held on a broker rung: the
// threshold is above zero, d is above zero and d is at least the threshold.
func (p RetryPolicy) waitsInBroker(d time.Duration) bool {
	p = p.orDefault()
	return p.threshold > 0 && d > 0 && d >= p.threshold
}

// brokerRungs are the distinct scheduled waits held on rungs, ascending and
// deduplicated by rung name (delays are named to the millisecond). A
// threshold of 0 has none.
func (p RetryPolicy) brokerRungs() []time.Duration {
	var out []time.Duration
	for _, d := range p.Schedule() {
		if p.waitsInBroker(d) {
			out = append(out, d.Truncate(time.Millisecond))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// chosenDelay is where a handler-chosen retry delay d (RetryAfter) waits:
// d itself when it is held in the consumer or no rung is declared; at or
// above the threshold, the nearest declared rung at or above d, or the
// longest rung when d exceeds them all (docs/wire.md §5.1), since only
// declared rungs exist on the broker.
func (p RetryPolicy) chosenDelay(d time.Duration) (wait time.Duration, inBroker bool) {
	if !p.waitsInBroker(d) {
		return d, false
	}
	rungs := p.brokerRungs()
	if len(rungs) == 0 {
		return d, false
	}
	for _, r := range rungs {
		if r >= d {
			return r, true
		}
	}
	return rungs[len(rungs)-1], true
}

// shouldRetry reports whether a message that failed on attempt (1-based),
// with the given age, is tried again: attempt < the maximum and the age is
// unknown or below a non-zero limit. The limit is inclusive.
func (p RetryPolicy) shouldRetry(attempt int, age time.Duration, ageKnown bool) bool {
	p = p.orDefault()
	if attempt >= p.maxAttempts {
		return false
	}
	return p.maxAge == 0 || !ageKnown || age < p.maxAge
}

// jittered returns the wait actually spent in the consumer for a scheduled
// wait d: uniform in [d×(1−f), d×(1+f)], never below 1 ms.
func (p RetryPolicy) jittered(d time.Duration) time.Duration {
	f := p.orDefault().jitter
	if f > 0 {
		d = time.Duration(float64(d) * (1 - f + 2*f*rand.Float64()))
	}
	return max(d, time.Millisecond)
}

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
