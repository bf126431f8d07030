package perf

import (
	"math"
	"slices"
	"sync"
	"time"
)

// Latencies records how long operations took, from many goroutines at
// once: a publish until its confirm, a publish until its delivery, a call
// until its reply. The zero value is ready to use.
type Latencies struct {
	mu          sync.Mutex
	d           []time.Duration
	first, last time.Time
}

// Add records one operation that took d and ended at end.
func (l *Latencies) Add(d time.Duration, end time.Time) {
	l.mu.Lock()
	l.d = append(l.d, d)
	if l.first.IsZero() || end.Before(l.first) {
		l.first = end
	}
	if end.After(l.last) {
		l.last = end
	}
	l.mu.Unlock()
}

// Since records one operation that started at start and ends now.
func (l *Latencies) Since(start time.Time) {
	now := time.Now()
	l.Add(now.Sub(start), now)
}

// Count is the number of operations recorded.
func (l *Latencies) Count() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.d)
}

// Summary is what a set of latencies comes to.
type Summary struct {
	// Count is the number of operations recorded.
	Count int
	// P50, P95 and P99 are nearest-rank percentiles (see Percentile); Max
	// is the slowest operation. All are 0 when nothing was recorded.
	P50, P95, P99, Max time.Duration
	// First and Last are when the first and the last recorded operation
	// ended (zero when nothing was recorded).
	First, Last time.Time
}

// Summary summarises what was recorded so far.
func (l *Latencies) Summary() Summary {
	l.mu.Lock()
	d := slices.Clone(l.d)
	s := Summary{Count: len(d), First: l.first, Last: l.last}
	l.mu.Unlock()
	if len(d) == 0 {
		return s
	}
	slices.Sort(d)
	s.P50, s.P95, s.P99, s.Max = Percentile(d, 0.50), Percentile(d, 0.95), Percentile(d, 0.99), d[len(d)-1]
	return s
}

// Rate is count operations over elapsed, per second (0 when elapsed is
// not positive).
func Rate(count int, elapsed time.Duration) float64 {
	if elapsed <= 0 {
		return 0
	}
	return float64(count) / elapsed.Seconds()
}

// Percentile is the nearest-rank p-th percentile (p in [0, 1]) of sorted,
// which must be sorted in increasing order: the smallest value that at
// least p of all the values do not exceed, sorted[⌈p·n⌉−1]. It is 0 for
// no values.
func Percentile(sorted []time.Duration, p float64) time.Duration {
	n := len(sorted)
	if n == 0 {
		return 0
	}
	// The small tolerance keeps p·n that is an integer in decimal (0.95 ×
	// 20) from rounding up a rank in binary.
	i := int(math.Ceil(p*float64(n)-1e-9)) - 1
	return sorted[min(max(i, 0), n-1)]
}
