package saga

import (
	"context"
	"errors"
	"sort"
	"sync"
	"time"
)

// State is where a saga stands.
type State string

// The states of a saga.
const (
	// Running: steps are being run; Record.Step is the next to run.
	Running State = "running"
	// Compensating: a step failed; the steps before it are being undone,
	// last first; Record.Step is how many remain to undo.
	Compensating State = "compensating"
	// Completed: every step ran.
	Completed State = "completed"
	// Compensated: a step failed and every earlier step was undone.
	Compensated State = "compensated"
	// Unresolved: a step failed and at least one compensation failed too:
	// Record.Failures says which; a person must look.
	Unresolved State = "unresolved"
)

// Finished reports whether the saga has nothing left to run.
func (s State) Finished() bool { return s == Completed || s == Compensated || s == Unresolved }

// Record is one saga's entry in the log.
type Record struct {
	Saga, ID string
	State    State
	// Step is, while Running, the index of the next step to run; while
	// Compensating, how many steps remain to undo (steps Step-1 … 0).
	Step int
	// Data is the saga's data (JSON), as the last step left it.
	Data []byte
	// Error is the step failure that started the compensation.
	Error string
	// Failures are the compensations that failed, "step: error", in the
	// order they were tried.
	Failures []string
	// Owner and LeaseUntil: the runner holding the saga and until when.
	Owner      string
	LeaseUntil time.Time
	Created    time.Time
	Updated    time.Time
}

// Errors of a Log. Like the driver's sentinels they are fragments, met
// wrapped in the words of the Saga that asked the log
// (`saga "trip": starting "t1": a saga with that id is already in the log`).
var (
	// ErrExists: Create was given a saga id already in the log.
	ErrExists = errors.New("a saga with that id is already in the log")
	// ErrNotOwner: Save was refused because another runner took the saga
	// over (the lease ran out).
	ErrNotOwner = errors.New("the saga was taken over by another runner (its lease ran out)")
	// ErrNotFound: no saga with that id.
	ErrNotFound = errors.New("no saga with that id in the log")
)

// Log is the saga log: it survives the process, so that another run can
// pick up where a dead one stopped. Implementations: NewMemoryLog here and
// sqlstore.Store.SagaLog for PostgreSQL and MySQL/MariaDB.
type Log interface {
	// Create adds a new saga (ErrExists if its id is taken).
	Create(ctx context.Context, r Record) error
	// Save updates a saga that r.Owner holds (ErrNotOwner otherwise).
	Save(ctx context.Context, r Record) error
	// Claim hands owner up to limit unfinished sagas of the named saga
	// whose lease ended before now, or that owner already holds, leased to
	// owner until now+lease.
	Claim(ctx context.Context, saga, owner string, now time.Time, lease time.Duration, limit int) ([]Record, error)
	// Get returns one saga (ErrNotFound if absent).
	Get(ctx context.Context, saga, id string) (Record, error)
	// List returns the sagas of the named saga in a state, oldest first.
	List(ctx context.Context, saga string, state State) ([]Record, error)
}

// MemoryLog is an in-process Log for tests and the demo: it does not
// survive the process, so it resumes nothing after a restart.
type MemoryLog struct {
	mu sync.Mutex
	m  map[[2]string]Record
}

// NewMemoryLog returns an empty memory log.
func NewMemoryLog() *MemoryLog { return &MemoryLog{m: map[[2]string]Record{}} }

func clone(r Record) Record {
	r.Data = append([]byte(nil), r.Data...)
	r.Failures = append([]string(nil), r.Failures...)
	return r
}

// Create implements Log.
func (l *MemoryLog) Create(_ context.Context, r Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := [2]string{r.Saga, r.ID}
	if _, ok := l.m[k]; ok {
		return ErrExists
	}
	l.m[k] = clone(r)
	return nil
}

// Save implements Log.
func (l *MemoryLog) Save(_ context.Context, r Record) error {
	l.mu.Lock()
	defer l.mu.Unlock()
	k := [2]string{r.Saga, r.ID}
	old, ok := l.m[k]
	if !ok {
		return ErrNotFound
	}
	if old.Owner != r.Owner {
		return ErrNotOwner
	}
	r.Created = old.Created
	l.m[k] = clone(r)
	return nil
}

// Claim implements Log.
func (l *MemoryLog) Claim(_ context.Context, saga, owner string, now time.Time, lease time.Duration, limit int) ([]Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Record
	for k, r := range l.m {
		if k[0] != saga || r.State.Finished() || (r.Owner != owner && r.LeaseUntil.After(now)) {
			continue
		}
		out = append(out, r)
	}
	sortRecords(out)
	if limit > 0 && len(out) > limit {
		out = out[:limit]
	}
	for i, r := range out {
		r.Owner, r.LeaseUntil = owner, now.Add(lease)
		l.m[[2]string{r.Saga, r.ID}] = r
		out[i] = clone(r)
	}
	return out, nil
}

// Get implements Log.
func (l *MemoryLog) Get(_ context.Context, saga, id string) (Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	r, ok := l.m[[2]string{saga, id}]
	if !ok {
		return Record{}, ErrNotFound
	}
	return clone(r), nil
}

// List implements Log.
func (l *MemoryLog) List(_ context.Context, saga string, state State) ([]Record, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []Record
	for k, r := range l.m {
		if k[0] == saga && r.State == state {
			out = append(out, clone(r))
		}
	}
	sortRecords(out)
	return out, nil
}

func sortRecords(rs []Record) {
	sort.Slice(rs, func(i, j int) bool {
		if !rs[i].Created.Equal(rs[j].Created) {
			return rs[i].Created.Before(rs[j].Created)
		}
		return rs[i].ID < rs[j].ID
	})
}
