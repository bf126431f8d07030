package acemq

import (
	"fmt"
	"math"
	"math/rand/v2"
	"slices"
	"strconv"
	"time"
)

// Names of the exchanges the library manages (WIRE.md §5.1).
const (
	DeadLetterExchange = "acemq.dlx"
	RetryExchange      = "acemq.retry"
)

// DefaultBrokerWaitThreshold is the wait from which a retry is held on a
// broker rung queue instead of in the consumer.
const DefaultBrokerWaitThreshold = 30 * time.Second

// RetryPolicy says how many times a message is attempted, how long to wait
// between attempts, where the wait happens, and when to give up on age.
// Build one with NoRetry, FixedRetry or ExponentialRetry and the modifiers;
// the zero RetryPolicy is NoRetry. It is a value; modifiers return copies.
type RetryPolicy struct {
	maxAttempts int
	initial     time.Duration
	multiplier  float64
	maxDelay    time.Duration
	maxAge      time.Duration
	jitter      float64
	threshold   time.Duration
	built       bool
}

// NoRetry is one attempt: a retry request dead-letters at once. It is the
// default policy.
func NoRetry() RetryPolicy {
	return RetryPolicy{maxAttempts: 1, multiplier: 1, threshold: DefaultBrokerWaitThreshold, built: true}
}

// FixedRetry makes n attempts in all (the first included), waiting d before
// each retry, without jitter. n below 1 is taken as 1 and a negative d as 0.
func FixedRetry(n int, d time.Duration) RetryPolicy {
	return RetryPolicy{maxAttempts: n, initial: d, multiplier: 1, maxDelay: d, threshold: DefaultBrokerWaitThreshold, built: true}.fix()
}

// ExponentialRetry makes n attempts in all (the first included), waiting
// initial before the second and doubling each time, capped at maxDelay, with
// ±20 % jitter on waits held in the consumer (waits held on a broker rung are
// never jittered). n below 1 is taken as 1; a maxDelay below initial as
// initial.
func ExponentialRetry(n int, initial, maxDelay time.Duration) RetryPolicy {
	return RetryPolicy{maxAttempts: n, initial: initial, multiplier: 2, maxDelay: maxDelay, jitter: DefaultExponentialJitter, threshold: DefaultBrokerWaitThreshold, built: true}.fix()
}

// DefaultExponentialJitter is the jitter factor ExponentialRetry starts with.
const DefaultExponentialJitter = 0.2

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
// it was first published) reaches age. An unknown age never stops it.
func (p RetryPolicy) GiveUpAfter(age time.Duration) RetryPolicy {
	p = p.orDefault()
	p.maxAge = max(age, 0)
	return p
}

// WithJitter returns a copy whose consumer waits land uniformly in
// [d×(1−f), d×(1+f)]. f is clamped to [0, 1].
func (p RetryPolicy) WithJitter(f float64) RetryPolicy {
	p = p.orDefault()
	p.jitter = math.Min(math.Max(f, 0), 1)
	return p
}

// WaitInBrokerFrom returns a copy whose waits at or above t are held on a
// broker rung queue; 0 keeps every wait in the consumer.
func (p RetryPolicy) WaitInBrokerFrom(t time.Duration) RetryPolicy {
	p = p.orDefault()
	p.threshold = max(t, 0)
	return p
}

// MaxAttempts is the number of deliveries, the first included.
func (p RetryPolicy) MaxAttempts() int { return p.orDefault().maxAttempts }

// InitialDelay is the wait before the second attempt.
func (p RetryPolicy) InitialDelay() time.Duration { return p.orDefault().initial }

// Multiplier is the growth of the wait per attempt.
func (p RetryPolicy) Multiplier() float64 { return p.orDefault().multiplier }

// MaxDelay caps any single wait.
func (p RetryPolicy) MaxDelay() time.Duration { return p.orDefault().maxDelay }

// MaxMessageAge is the age limit; 0 means none.
func (p RetryPolicy) MaxMessageAge() time.Duration { return p.orDefault().maxAge }

// JitterFactor is the jitter applied to consumer waits.
func (p RetryPolicy) JitterFactor() float64 { return p.orDefault().jitter }

// BrokerWaitThreshold is the wait from which retries are held on a rung.
func (p RetryPolicy) BrokerWaitThreshold() time.Duration { return p.orDefault().threshold }

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

// DelayAfter is the unjittered wait after a failed attempt (1-based) before
// the next one.
func (p RetryPolicy) DelayAfter(attempt int) time.Duration {
	p = p.orDefault()
	return p.delay(max(attempt-1, 0))
}

// WaitsInBroker reports whether a wait of d is held on a broker rung: the
// threshold is above zero, d is above zero and d is at least the threshold.
func (p RetryPolicy) WaitsInBroker(d time.Duration) bool {
	p = p.orDefault()
	return p.threshold > 0 && d > 0 && d >= p.threshold
}

// BrokerRungs are the distinct scheduled waits held on rungs, ascending and
// deduplicated by rung name (delays are named to the millisecond). A
// threshold of 0 has none.
func (p RetryPolicy) BrokerRungs() []time.Duration {
	var out []time.Duration
	for _, d := range p.Schedule() {
		if p.WaitsInBroker(d) {
			out = append(out, d.Truncate(time.Millisecond))
		}
	}
	slices.Sort(out)
	return slices.Compact(out)
}

// ShouldRetry reports whether a message that failed on attempt (1-based),
// with the given age, is tried again: attempt < MaxAttempts and the age is
// unknown or below a non-zero limit. The limit is inclusive.
func (p RetryPolicy) ShouldRetry(attempt int, age time.Duration, ageKnown bool) bool {
	p = p.orDefault()
	if attempt >= p.maxAttempts {
		return false
	}
	return p.maxAge == 0 || !ageKnown || age < p.maxAge
}

// Jittered returns the wait actually spent in the consumer for a scheduled
// wait d: uniform in [d×(1−f), d×(1+f)], never below 1 ms.
func (p RetryPolicy) Jittered(d time.Duration) time.Duration {
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
		s = fmt.Sprintf("fixed(%d, %s)", p.maxAttempts, FormatDelay(p.initial))
	default:
		s = fmt.Sprintf("exponential(%d, %s, %s)", p.maxAttempts, FormatDelay(p.initial), FormatDelay(p.maxDelay))
		jitter = DefaultExponentialJitter
	}
	if p.maxAge > 0 {
		s += ".giveUpAfter(" + FormatDelay(p.maxAge) + ")"
	}
	if p.jitter != jitter {
		s += ".withJitter(" + strconv.FormatFloat(p.jitter, 'g', -1, 64) + ")"
	}
	if p.threshold != DefaultBrokerWaitThreshold {
		s += ".waitInBrokerFrom(" + FormatDelay(p.threshold) + ")"
	}
	return s
}

// DeadLetterQueue is the name of q's dead-letter queue, {q}.dlq.
func DeadLetterQueue(q string) string { return q + ".dlq" }

// ParkedQueue is the name of q's parking queue, {q}.parked.
func ParkedQueue(q string) string { return q + ".parked" }

// RungQueue is the name of q's retry rung for a wait of d,
// {q}.retry.{delay}.
func RungQueue(q string, d time.Duration) string { return q + ".retry." + FormatDelay(d) }

// FormatDelay renders a delay as the family names rungs: Nh for whole
// hours, else Nm for whole minutes, else Ns for whole seconds, else Nms.
func FormatDelay(d time.Duration) string {
	ms := d.Milliseconds()
	switch {
	case ms != 0 && ms%3_600_000 == 0:
		return fmt.Sprintf("%dh", ms/3_600_000)
	case ms != 0 && ms%60_000 == 0:
		return fmt.Sprintf("%dm", ms/60_000)
	case ms != 0 && ms%1000 == 0:
		return fmt.Sprintf("%ds", ms/1000)
	}
	return fmt.Sprintf("%dms", ms)
}
