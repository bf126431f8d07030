package outbox

import (
	"context"
	"sort"
	"sync"
	"time"
)

// Memory is an in-process Store, for memory://, tests and the demo. Its
// records live as long as the value: nothing survives the process, and Add
// joins no transaction (its tx argument is ignored). It is also a Notifier:
// a relay on it wakes as soon as records are added.
type Memory struct {
	mu      sync.Mutex
	seq     int64
	recs    []*memRecord // in Seq order
	waiters map[chan struct{}]struct{}
}

type memRecord struct {
	Record
	next   time.Time
	leased bool
}

// NewMemory returns an empty memory store.
func NewMemory() *Memory { return &Memory{waiters: map[chan struct{}]struct{}{}} }

// Add stores recs at once; tx is ignored.
func (m *Memory) Add(_ context.Context, _ Execer, recs ...Record) error {
	m.mu.Lock()
	for _, r := range recs {
		m.seq++
		r.Seq = m.seq
		r.Headers = copyTable(r.Headers)
		r.Body = append([]byte(nil), r.Body...)
		m.recs = append(m.recs, &memRecord{Record: r, next: r.Recorded})
	}
	for w := range m.waiters {
		select {
		case w <- struct{}{}:
		default:
		}
	}
	m.mu.Unlock()
	return nil
}

// Relay implements Store.
func (m *Memory) Relay(ctx context.Context, now time.Time, limit int, f func([]Record) []Result) (int, error) {
	if err := ctx.Err(); err != nil {
		return 0, err
	}
	m.mu.Lock()
	blocked := map[[2]string]bool{}
	var batch []*memRecord
	for _, r := range m.recs {
		if len(batch) == limit {
			break
		}
		if !r.Retired.IsZero() {
			continue
		}
		d := [2]string{r.Exchange, r.RoutingKey}
		if r.leased || r.next.After(now) || blocked[d] {
			blocked[d] = true
			continue
		}
		r.leased = true
		batch = append(batch, r)
	}
	recs := make([]Record, len(batch))
	for i, r := range batch {
		recs[i] = r.Record
		recs[i].Headers = copyTable(r.Headers)
	}
	m.mu.Unlock()
	if len(batch) == 0 {
		return 0, nil
	}
	results := f(recs)
	m.mu.Lock()
	defer m.mu.Unlock()
	published := map[*memRecord]bool{}
	for i, r := range batch {
		r.leased = false
		if i >= len(results) {
			continue
		}
		res := results[i]
		switch {
		case res.Published:
			published[r] = true
		case res.Err != nil:
			r.Attempts++
			r.LastError = res.Err.Error()
			r.next = res.Next
			if res.Retire {
				r.Retired = now
			}
		}
	}
	if len(published) > 0 {
		kept := m.recs[:0]
		for _, r := range m.recs {
			if !published[r] {
				kept = append(kept, r)
			}
		}
		clear(m.recs[len(kept):])
		m.recs = kept
	}
	return len(batch), nil
}

// Listen implements Notifier.
func (m *Memory) Listen(ctx context.Context, wake func()) error {
	w := make(chan struct{}, 1)
	m.mu.Lock()
	m.waiters[w] = struct{}{}
	m.mu.Unlock()
	defer func() {
		m.mu.Lock()
		delete(m.waiters, w)
		m.mu.Unlock()
	}()
	for {
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-w:
			wake()
		}
	}
}

// Len is the number of records held, pending and retired.
func (m *Memory) Len() int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return len(m.recs)
}

// Status implements Inspector.
func (m *Memory) Status(context.Context) ([]DestinationStatus, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	by := map[[2]string]*DestinationStatus{}
	var out []DestinationStatus
	for _, r := range m.recs {
		d := [2]string{r.Exchange, r.RoutingKey}
		s := by[d]
		if s == nil {
			s = &DestinationStatus{Exchange: r.Exchange, RoutingKey: r.RoutingKey}
			by[d] = s
		}
		if !r.Retired.IsZero() {
			s.Retired++
			continue
		}
		s.Pending++
		if s.OldestPending.IsZero() || r.Recorded.Before(s.OldestPending) {
			s.OldestPending = r.Recorded
		}
	}
	for _, s := range by {
		out = append(out, *s)
	}
	sortStatus(out)
	return out, nil
}

func sortStatus(s []DestinationStatus) {
	sort.Slice(s, func(i, j int) bool {
		if s[i].Exchange != s[j].Exchange {
			return s[i].Exchange < s[j].Exchange
		}
		return s[i].RoutingKey < s[j].RoutingKey
	})
}

// Retired implements Inspector.
func (m *Memory) Retired(_ context.Context, limit int) ([]Record, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	var out []Record
	for _, r := range m.recs {
		if !r.Retired.IsZero() && (limit <= 0 || len(out) < limit) {
			out = append(out, r.Record)
		}
	}
	return out, nil
}

// Revive implements Inspector.
func (m *Memory) Revive(_ context.Context, seqs ...int64) (int, error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	want := map[int64]bool{}
	for _, s := range seqs {
		want[s] = true
	}
	n := 0
	for _, r := range m.recs {
		if r.Retired.IsZero() || (len(seqs) > 0 && !want[r.Seq]) {
			continue
		}
		r.Retired, r.Attempts, r.next = time.Time{}, 0, time.Time{}
		n++
	}
	for w := range m.waiters {
		select {
		case w <- struct{}{}:
		default:
		}
	}
	return n, nil
}

func copyTable(h map[string]any) map[string]any {
	if h == nil {
		return nil
	}
	out := make(map[string]any, len(h))
	for k, v := range h {
		out[k] = copyValue(v)
	}
	return out
}

func copyValue(v any) any {
	switch x := v.(type) {
	case []byte:
		return append([]byte(nil), x...)
	case []any:
		out := make([]any, len(x))
		for i, e := range x {
			out[i] = copyValue(e)
		}
		return out
	case map[string]any:
		return copyTable(x)
	}
	return v
}
