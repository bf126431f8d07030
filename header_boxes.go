package acemq

import "sync/atomic"

// headerBoxes keeps the boxed form (the any a header table holds) of the
// string header values a publisher wrote last: type, correlation,
// causation and origin. Writing a string into a map[string]any allocates
// a box for it; values that repeat from one message to the next (the
// type, the connection's origin, a constant correlation) are boxed once
// and the box shared, as a hand-written table of constants would share
// them. A value that changes is boxed as before and replaces the kept one
// (no extra allocation: the kept box is the one just made). The boxes
// hold immutable strings, so sharing them between messages and goroutines
// is safe. Safe for concurrent use; the zero value is ready.
type headerBoxes struct {
	typ, correlation, causation, origin atomic.Value // string
}

// box returns s boxed, reusing slot's box when it holds s.
func (b *headerBoxes) box(slot *atomic.Value, s string) any {
	if v := slot.Load(); v != nil && v.(string) == s {
		return v
	}
	v := any(s)
	slot.Store(v)
	return v
}
