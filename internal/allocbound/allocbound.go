// Package allocbound lets a test or fuzz target bound what one call
// allocates: at most K bytes per input byte plus a constant, so that a
// decoder whose memory grows faster than its input (with the square of a
// nesting depth, say) fails the test instead of passing on small inputs.
package allocbound

import (
	"runtime"
	"testing"
)

// Bytes returns how many bytes f allocated on the heap (the growth of
// runtime.MemStats.TotalAlloc across it). Other goroutines' allocations in
// that window count too, so bounds leave room for them.
func Bytes(f func()) uint64 {
	var before, after runtime.MemStats
	runtime.ReadMemStats(&before)
	f()
	runtime.ReadMemStats(&after)
	return after.TotalAlloc - before.TotalAlloc
}

// Check runs f once and fails t when it allocated more than k*n + c bytes,
// n being the input's length. It returns what f allocated.
func Check(t testing.TB, n int, k, c uint64, f func()) uint64 {
	t.Helper()
	got := Bytes(f)
	if limit := k*uint64(n) + c; got > limit {
		t.Fatalf("a %d-byte input allocated %d bytes, more than the bound of %d × %d + %d = %d", n, got, k, n, c, limit)
	}
	return got
}
