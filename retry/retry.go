package retry

import (
	"fmt"
	"math"
	"strconv"
	"time"

	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/wire"
)

// Policy says how many times a message is attempted, how long to wait
// between attempts, where the wait happens, and when to give up on age
// (docs/wire.md §7). Build one with None, Fixed or Exponential and the
// modifiers; the zero Policy is None. It is a comparable value; modifiers
// return copies. String renders it in the family's notation.
//
// A policy built with nonsensical values — fewer than one attempt, a
// negative delay, a cap below the first delay, a negative age limit or
// threshold, a jitter outside [0, 1] — keeps the first mistake (Err) and
// is refused by acemq.Consume and topology.Topology.Queue (acemq.WithRetry),
// with an error saying what to change.
type Policy struct {
	handle       // the plan, found by engine.PolicyOf: acemq runs it through it
	err    error // the first nonsensical value it was given
}

// handle is embedded in Policy, unexported: engine.PolicyOf finds the plan
// through it, and applications see nothing of it.
type handle = engine.PolicyHandle

// defaultExponentialJitter is the jitter factor Exponential starts with.
const defaultExponentialJitter = 0.2

// None is one attempt: a retry request dead-letters at once. It is the
// default policy, and the zero Policy.
func None() Policy { return Policy{} }

// Fixed makes n attempts in all (the first included), waiting d before each
// retry, without jitter. n must be at least 1 (1 is None) and d must not be
// negative.
func Fixed(n int, d time.Duration) Policy {
	pl := engine.Policy{MaxAttempts: n, Initial: d, Multiplier: 1, MaxDelay: d, Threshold: engine.DefaultBrokerWaitThreshold}
	var p Policy
	switch {
	case n < 1:
		p = p.failf("Fixed(%d, %s): the number of attempts includes the first, so it must be at least 1 (1 is None)", n, d)
	case d < 0:
		p = p.failf("Fixed(%d, %s): the delay must not be negative", n, d)
	}
	return p.with(fix(pl))
}

// Exponential makes n attempts in all (the first included), waiting
// initial before the second and doubling each time, capped at maxDelay,
// with ±20 % jitter on waits held in the consumer (waits held on a broker
// rung are never jittered). n must be at least 1, initial must not be
// negative and maxDelay must not be below initial.
func Exponential(n int, initial, maxDelay time.Duration) Policy {
	pl := engine.Policy{MaxAttempts: n, Initial: initial, Multiplier: 2, MaxDelay: maxDelay, Jitter: defaultExponentialJitter, Threshold: engine.DefaultBrokerWaitThreshold}
	var p Policy
	switch {
	case n < 1:
		p = p.failf("Exponential(%d, %s, %s): the number of attempts includes the first, so it must be at least 1 (1 is None)", n, initial, maxDelay)
	case initial < 0:
		p = p.failf("Exponential(%d, %s, %s): the first delay must not be negative", n, initial, maxDelay)
	case maxDelay < initial:
		p = p.failf("Exponential(%d, %s, %s): the cap on a delay (%s) is below the first delay (%s); give a cap at least as large", n, initial, maxDelay, maxDelay, initial)
	}
	return p.with(fix(pl))
}

// fix brings a plan built from nonsensical values back to a runnable one.
func fix(pl engine.Policy) engine.Policy {
	pl.MaxAttempts = max(pl.MaxAttempts, 1)
	pl.Initial = max(pl.Initial, 0)
	pl.MaxDelay = max(pl.MaxDelay, pl.Initial)
	return pl
}

// with returns a copy of p holding the plan pl.
func (p Policy) with(pl engine.Policy) Policy {
	p.handle = engine.NewPolicyHandle(pl)
	return p
}

// failf records the policy's first mistake.
func (p Policy) failf(format string, args ...any) Policy {
	if p.err == nil {
		p.err = fmt.Errorf(format, args...)
	}
	return p
}

// Err is the first nonsensical value the policy was built with, or nil.
func (p Policy) Err() error {
	if p.err == nil {
		return nil
	}
	return fmt.Errorf("retry: %w", p.err)
}

// GiveUpAfter returns a copy that stops retrying once a message's age (since
// it was first published) reaches age; 0 means no limit. An unknown age
// never stops it. age must not be negative.
func (p Policy) GiveUpAfter(age time.Duration) Policy {
	if age < 0 {
		p = p.failf("GiveUpAfter(%s): the age limit must not be negative (0 means no limit)", age)
	}
	pl := engine.PolicyOf(p)
	pl.MaxAge = max(age, 0)
	return p.with(pl)
}

// Jitter returns a copy whose consumer waits land uniformly in
// [d×(1−f), d×(1+f)]. f must be in [0, 1].
func (p Policy) Jitter(f float64) Policy {
	if !(f >= 0 && f <= 1) {
		p = p.failf("Jitter(%g): the jitter factor must be between 0 (none) and 1", f)
	}
	pl := engine.PolicyOf(p)
	pl.Jitter = math.Min(math.Max(f, 0), 1)
	if math.IsNaN(pl.Jitter) {
		pl.Jitter = 0
	}
	return p.with(pl)
}

// WaitInBrokerFrom returns a copy whose waits at or above t are held on a
// broker rung queue; 0 keeps every wait in the consumer. t must not be
// negative. The default is 30 s.
func (p Policy) WaitInBrokerFrom(t time.Duration) Policy {
	if t < 0 {
		p = p.failf("WaitInBrokerFrom(%s): the threshold must not be negative (0 keeps every wait in the consumer)", t)
	}
	pl := engine.PolicyOf(p)
	pl.Threshold = max(t, 0)
	return p.with(pl)
}

// Schedule is the unjittered wait before each retry: entry i is the wait
// before attempt i+2, min(initial × multiplier^i, max).
func (p Policy) Schedule() []time.Duration { return engine.PolicyOf(p).Schedule() }

// String renders the policy in the family's notation, for example
// "exponential(6, 10s, 1m).giveUpAfter(2m)"; modifiers that differ from the
// factory's defaults are appended (.withJitter, .waitInBrokerFrom).
func (p Policy) String() string {
	pl := engine.PolicyOf(p)
	var s string
	var jitter float64
	switch {
	case pl.MaxAttempts == 1 && pl.Initial == 0:
		s = "none()"
	case pl.Multiplier == 1:
		s = fmt.Sprintf("fixed(%d, %s)", pl.MaxAttempts, wire.FormatDelay(pl.Initial))
	default:
		s = fmt.Sprintf("exponential(%d, %s, %s)", pl.MaxAttempts, wire.FormatDelay(pl.Initial), wire.FormatDelay(pl.MaxDelay))
		jitter = defaultExponentialJitter
	}
	if pl.MaxAge > 0 {
		s += ".giveUpAfter(" + wire.FormatDelay(pl.MaxAge) + ")"
	}
	if pl.Jitter != jitter {
		s += ".withJitter(" + strconv.FormatFloat(pl.Jitter, 'g', -1, 64) + ")"
	}
	if pl.Threshold != engine.DefaultBrokerWaitThreshold {
		s += ".waitInBrokerFrom(" + wire.FormatDelay(pl.Threshold) + ")"
	}
	return s
}
