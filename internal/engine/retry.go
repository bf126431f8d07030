package engine

import (
	"math"
	"math/rand/v2"
	"slices"
	"time"
)

// Policy is the plan of a consumer's retry policy (retry.Policy, which
// converts into it): how many attempts, the unjittered waits between them,
// the jitter of waits held in the consumer, where a wait is held, and the
// age limit (docs/wire.md §7).
type Policy struct {
	// MaxAttempts counts every attempt, the first included; at least 1.
	MaxAttempts int
	// Initial is the wait before the second attempt; each later wait is
	// the one before times Multiplier, capped at MaxDelay.
	Initial    time.Duration
	Multiplier float64
	MaxDelay   time.Duration
	// MaxAge stops retries once a message is this old; 0 means no limit.
	MaxAge time.Duration
	// Jitter spreads a wait held in the consumer over [d×(1−f), d×(1+f)].
	Jitter float64
	// Threshold is the wait from which it is held on a broker rung; 0
	// keeps every wait in the consumer.
	Threshold time.Duration
}

// Schedule is the unjittered wait before each retry: entry i is the wait
// before attempt i+2, min(Initial × Multiplier^i, MaxDelay).
func (p Policy) Schedule() []time.Duration {
	out := make([]time.Duration, 0, max(p.MaxAttempts-1, 0))
	for i := 0; i < p.MaxAttempts-1; i++ {
		out = append(out, p.delay(i))
	}
	return out
}

func (p Policy) delay(i int) time.Duration {
	d := float64(p.Initial) * math.Pow(p.Multiplier, float64(i))
	if d >= float64(p.MaxDelay) || math.IsInf(d, 0) {
		return p.MaxDelay
	}
	return time.Duration(d)
}

// DelayAfter is the unjittered wait after a failed attempt (1-based) before
// the next one.
func (p Policy) DelayAfter(attempt int) time.Duration {
	return p.delay(max(attempt-1, 0))
}

// WaitsInBroker reports whether a wait of d is held on a broker rung: the
// threshold is above zero, d is above zero and d is at least the threshold.
func (p Policy) WaitsInBroker(d time.Duration) bool {
	return p.Threshold > 0 && d > 0 && d >= p.Threshold
}

// BrokerRungs are the distinct scheduled waits held on rungs, ascending and
// deduplicated by rung name (delays are named to the millisecond). A
// threshold of 0 has none.
func (p Policy) BrokerRungs() []time.Duration {
	var out []time.Duration
	for _, d := range p.Schedule() {
		if p.WaitsInBroker(d) {
			out = append(out, d.Truncate(time.Millisecond))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ChosenDelay is where a handler-chosen retry delay d (RetryAfter) waits:
// d itself when it is held in the consumer or no rung is declared; at or
// above the threshold, the nearest declared rung at or above d, or the
// longest rung when d exceeds them all (docs/wire.md §5.1), since only
// declared rungs exist on the broker.
func (p Policy) ChosenDelay(d time.Duration) (wait time.Duration, inBroker bool) {
	if !p.WaitsInBroker(d) {
		return d, false
	}
	rungs := p.BrokerRungs()
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

// ShouldRetry reports whether a message that failed on attempt (1-based),
// with the given age, is tried again: attempt < the maximum and the age is
// unknown or below a non-zero limit. The limit is inclusive.
func (p Policy) ShouldRetry(attempt int, age time.Duration, ageKnown bool) bool {
	if attempt >= p.MaxAttempts {
		return false
	}
	return p.MaxAge == 0 || !ageKnown || age < p.MaxAge
}

// Jittered returns the wait actually spent in the consumer for a scheduled
// wait d: uniform in [d×(1−f), d×(1+f)], never below 1 ms.
func (p Policy) Jittered(d time.Duration) time.Duration {
	if f := p.Jitter; f > 0 {
		d = time.Duration(float64(d) * (1 - f + 2*f*rand.Float64()))
	}
	return max(d, time.Millisecond)
}

// DefaultBrokerWaitThreshold is the wait from which a retry is held on a
// broker rung queue unless the policy says otherwise.
const DefaultBrokerWaitThreshold = 30 * time.Second

// NoRetry is the plan of the zero retry.Policy: one attempt.
func NoRetry() Policy {
	return Policy{MaxAttempts: 1, Multiplier: 1, Threshold: DefaultBrokerWaitThreshold}
}

// PolicyHandle lets a type that embeds it (a retry.Policy) be found by
// PolicyOf. Its one method is unexported, so embedding it adds nothing to
// the embedding type's API. The zero PolicyHandle holds NoRetry, and
// NewPolicyHandle(NoRetry()) is the zero PolicyHandle, so handles holding
// the same plan are equal.
type PolicyHandle struct {
	p   Policy
	set bool // p is not NoRetry
}

// NewPolicyHandle returns the PolicyHandle of p.
func NewPolicyHandle(p Policy) PolicyHandle {
	if p == NoRetry() {
		return PolicyHandle{}
	}
	return PolicyHandle{p: p, set: true}
}

func (h PolicyHandle) enginePolicy() Policy {
	if !h.set {
		return NoRetry()
	}
	return h.p
}

// PolicyOf returns the plan of p, a retry.Policy (NoRetry for anything
// else).
func PolicyOf(p any) Policy {
	if h, ok := p.(interface{ enginePolicy() Policy }); ok {
		return h.enginePolicy()
	}
	return NoRetry()
}
