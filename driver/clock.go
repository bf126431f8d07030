package driver

import "time"

// Clock is the time a broker keeps. A broker normally keeps real time; the
// memory broker can be given a clock a test moves by hand
// (memory.SetClock), and then everything timed about it — message and
// queue TTLs, the retry rungs' expiry, and the waits package acemq and the
// packages built on it make for a connection to it — follows that clock.
type Clock interface {
	// Now is the clock's current time.
	Now() time.Time
	// AfterFunc calls f once, when d has passed on the clock, unless the
	// returned Timer is stopped first. f must not block: a clock a test
	// moves calls it on the goroutine that moves the clock.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a pending call of Clock.AfterFunc.
type Timer interface {
	// Stop prevents the call if it has not happened yet, and reports
	// whether it did prevent it.
	Stop() bool
}

// Clocked is implemented by a Conn whose broker keeps a clock of its own
// (the memory broker with memory.SetClock). Package acemq and the packages
// built on it time what they wait for on a connection (in-consumer retry
// waits, in-progress delays, the scheduler's due times, the outbox relay's
// polls and backoff) on this clock; a Conn that does not implement it keeps
// real time (RealClock).
type Clocked interface {
	Clock() Clock
}

// RealClock is the real time of package time.
var RealClock Clock = realClock{}

type realClock struct{}

func (realClock) Now() time.Time { return time.Now() }

func (realClock) AfterFunc(d time.Duration, f func()) Timer { return time.AfterFunc(d, f) }

// ClockOf returns c's clock when it implements Clocked, else RealClock.
func ClockOf(c Conn) Clock {
	if cc, ok := c.(Clocked); ok {
		if k := cc.Clock(); k != nil {
			return k
		}
	}
	return RealClock
}
