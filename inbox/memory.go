package inbox

import (
	"context"
	"sync"
	"time"
)

// Memory is an in-process Store, for memory://, tests and the demo. It
// dedupes only within one process and forgets everything when the process
// ends.
type Memory struct {
	mu sync.Mutex
	m  map[memKey]*memEntry
}

type memKey struct{ consumer, key string }

type memEntry struct {
	token     string
	until     time.Time
	confirmed time.Time
}

// DefaultMemoryRetention is how long the memory store remembers a
// confirmation unless the inbox says otherwise (docs/wire.md §12).
const DefaultMemoryRetention = time.Hour

// NewMemory returns an empty memory store.
func NewMemory() *Memory { return &Memory{m: map[memKey]*memEntry{}} }

// DefaultRetention is DefaultMemoryRetention.
func (s *Memory) DefaultRetention() time.Duration { return DefaultMemoryRetention }

// Claim implements Store.
func (s *Memory) Claim(_ context.Context, consumer, key, token string, now time.Time, lease time.Duration) (State, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := memKey{consumer, key}
	e := s.m[k]
	switch {
	case e == nil:
		s.m[k] = &memEntry{token: token, until: now.Add(lease)}
		return Claimed, nil
	case !e.confirmed.IsZero():
		return Done, nil
	case e.until.After(now):
		return Held, nil
	}
	e.token, e.until = token, now.Add(lease)
	return Claimed, nil
}

// Confirm implements Store.
func (s *Memory) Confirm(_ context.Context, consumer, key, token string, now time.Time) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	e := s.m[memKey{consumer, key}]
	if e == nil || e.token != token || !e.confirmed.IsZero() {
		return ErrClaimLost
	}
	e.confirmed, e.token = now, ""
	return nil
}

// Release implements Store.
func (s *Memory) Release(_ context.Context, consumer, key, token string) error {
	s.mu.Lock()
	defer s.mu.Unlock()
	k := memKey{consumer, key}
	if e := s.m[k]; e != nil && e.token == token && e.confirmed.IsZero() {
		delete(s.m, k)
	}
	return nil
}

// Prune implements Store.
func (s *Memory) Prune(_ context.Context, now, confirmedBefore time.Time) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	n := 0
	for k, e := range s.m {
		if (e.confirmed.IsZero() && !e.until.After(now)) || (!e.confirmed.IsZero() && e.confirmed.Before(confirmedBefore)) {
			delete(s.m, k)
			n++
		}
	}
	return n, nil
}

// Len is the number of claims and confirmations held.
func (s *Memory) Len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.m)
}
