package perf

import (
	"encoding/binary"
	"time"
)

// StampSize is the size of the send time a stamped body carries in its
// first bytes: the smallest body Stamp writes.
const StampSize = 8

// Stamp returns a body of size bytes (at least StampSize) carrying the
// current time in its first StampSize bytes, so that whoever receives it can
// tell how long it took to arrive (SentAt). The rest is zeros.
func Stamp(size int) []byte {
	body := make([]byte, max(size, StampSize))
	binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
	return body
}

// SentAt reads the send time Stamp wrote; ok is false for a body too short
// to carry one.
func SentAt(body []byte) (t time.Time, ok bool) {
	if len(body) < StampSize {
		return time.Time{}, false
	}
	return time.Unix(0, int64(binary.BigEndian.Uint64(body))), true
}

// Shares splits n operations among k workers as evenly as possible: the
// first n mod k get one more.
func Shares(n, k int) []int {
	out := make([]int, k)
	for i := range out {
		out[i] = n / k
		if i < n%k {
			out[i]++
		}
	}
	return out
}
