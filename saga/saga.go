package saga

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	acemqtel "github.com/acemq/acemq/internal/telemetry"
	"github.com/google/uuid"
	"go.opentelemetry.io/otel"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/metric"
	"go.opentelemetry.io/otel/metric/noop"
)

// Step is one step of a saga: Do does the work; Undo, when the saga fails
// at a later step, undoes it (nil: nothing to undo). Both get the saga's
// data, which Do may change (to note what Undo will need); the data is
// written to the log after every step.
//
// A step interrupted by a crash is run again when the saga is resumed:
// make Do and Undo idempotent (package inbox, keyed by the saga id and the
// step name, is one way).
type Step[T any] struct {
	Name string
	Do   func(ctx context.Context, data *T) error
	Undo func(ctx context.Context, data *T) error
}

// Saga is a sequence of steps run in order and, on a failure, compensated
// in reverse, with its progress written to a Log so that a saga whose
// process died is resumed (or compensated) by Resume. A Saga is safe for
// concurrent use: each Run is one saga instance, named by its id.
type Saga[T any] struct {
	name  string
	log   Log
	steps []Step[T]
	cfg   config
	err   error
	total metric.Int64Counter
	fails metric.Int64Counter
}

// Result is how one saga instance ended.
type Result[T any] struct {
	ID    string
	State State
	Data  T
	// Err is the step failure that made it compensate.
	Err error
	// Failures are the compensations that failed (State Unresolved).
	Failures []string
}

// New returns the saga called name over log, running steps in order.
// Mistakes are returned by Run and Resume.
func New[T any](name string, log Log, steps []Step[T], opts ...Option) *Saga[T] {
	s := &Saga[T]{name: name, log: log, steps: steps, cfg: config{lease: DefaultLease, owner: uuid.NewString()}}
	for _, o := range opts {
		o.apply(&s.cfg)
	}
	seen := map[string]bool{}
	for i, st := range steps {
		switch {
		case st.Name == "":
			s.err = fmt.Errorf("saga %q: step %d has no name", name, i+1)
		case seen[st.Name]:
			s.err = fmt.Errorf("saga %q: two steps are called %q", name, st.Name)
		case st.Do == nil:
			s.err = fmt.Errorf("saga %q: step %q has no Do", name, st.Name)
		}
		seen[st.Name] = true
	}
	switch {
	case log == nil:
		s.err = errors.New("saga: New was given a nil log")
	case name == "" || len(name) > 191:
		s.err = fmt.Errorf("saga: the name %q must be 1 to 191 bytes", name)
	case len(steps) == 0:
		s.err = fmt.Errorf("saga %q: no steps", name)
	case s.cfg.owner == "" || len(s.cfg.owner) > 64:
		s.err = fmt.Errorf("saga %q: WithOwner(%q): the owner must be 1 to 64 bytes", name, s.cfg.owner)
	case s.cfg.lease <= 0:
		s.err = fmt.Errorf("saga %q: WithLease(%v): the lease must be positive", name, s.cfg.lease)
	}
	mp := s.cfg.meter
	if mp == nil {
		mp = otel.GetMeterProvider()
	}
	m := mp.Meter(acemqtel.Scope)
	var err error
	if s.total, err = m.Int64Counter(acemqtel.SagaTotal, metric.WithDescription("Saga instances that ended, by state.")); err != nil {
		s.total = noop.Int64Counter{}
	}
	if s.fails, err = m.Int64Counter(acemqtel.SagaCompensationFailed, metric.WithDescription("Compensations that failed; each leaves its saga unresolved.")); err != nil {
		s.fails = noop.Int64Counter{}
	}
	return s
}

// Run starts the saga instance id with data and runs it to its end:
// Completed, Compensated or Unresolved. The error is nil for all three
// (the Result says which); it is non-nil when the log failed or another
// runner took the saga over, and the saga is then left for Resume. An id
// already in the log fails with ErrExists.
func (s *Saga[T]) Run(ctx context.Context, id string, data T) (Result[T], error) {
	if s.err != nil {
		return Result[T]{ID: id}, s.err
	}
	if id == "" || len(id) > 191 {
		return Result[T]{ID: id}, fmt.Errorf("saga %q: the id %q must be 1 to 191 bytes", s.name, id)
	}
	b, err := json.Marshal(data)
	if err != nil {
		return Result[T]{ID: id}, fmt.Errorf("saga %q: encoding the data of %q: %w", s.name, id, err)
	}
	now := time.Now()
	rec := Record{Saga: s.name, ID: id, State: Running, Data: b, Owner: s.cfg.owner, LeaseUntil: now.Add(s.cfg.lease), Created: now, Updated: now}
	if err := s.log.Create(ctx, rec); err != nil {
		return Result[T]{ID: id}, fmt.Errorf("saga %q: starting %q: %w", s.name, id, err)
	}
	return s.drive(ctx, rec, data)
}

// Resume takes over the unfinished instances of this saga whose runner is
// gone (their lease ran out, or they are held by this saga's owner, see
// WithOwner) and runs each to its end: a Running one goes on from the
// step it was at (re-running that step), or, under WithResume(Compensate),
// is compensated; a Compensating one goes on compensating. It returns the
// results of those it finished and the first error.
func (s *Saga[T]) Resume(ctx context.Context) ([]Result[T], error) {
	if s.err != nil {
		return nil, s.err
	}
	recs, err := s.log.Claim(ctx, s.name, s.cfg.owner, time.Now(), s.cfg.lease, 0)
	if err != nil {
		return nil, fmt.Errorf("saga %q: claiming unfinished sagas: %w", s.name, err)
	}
	var out []Result[T]
	var first error
	for _, rec := range recs {
		var data T
		if err := json.Unmarshal(rec.Data, &data); err != nil {
			first = cmp(first, fmt.Errorf("saga %q: the logged data of %q cannot be decoded: %w", s.name, rec.ID, err))
			continue
		}
		if rec.State == Running && s.cfg.resume == Compensate {
			rec.State, rec.Error = Compensating, "compensated on resume after its runner stopped at step "+s.stepName(rec.Step)
		}
		r, err := s.drive(ctx, rec, data)
		if err != nil {
			first = cmp(first, err)
			continue
		}
		out = append(out, r)
	}
	return out, first
}

func cmp(first, err error) error {
	if first == nil {
		return err
	}
	return first
}

// Unresolved lists the instances whose compensation failed somewhere.
func (s *Saga[T]) Unresolved(ctx context.Context) ([]Record, error) {
	if s.err != nil {
		return nil, s.err
	}
	return s.log.List(ctx, s.name, Unresolved)
}

func (s *Saga[T]) stepName(i int) string {
	if i >= 0 && i < len(s.steps) {
		return s.steps[i].Name
	}
	return fmt.Sprint(i)
}

// save writes rec with data, renewing the lease.
func (s *Saga[T]) save(ctx context.Context, rec *Record, data T) error {
	b, err := json.Marshal(data)
	if err != nil {
		return fmt.Errorf("saga %q: encoding the data of %q: %w", s.name, rec.ID, err)
	}
	now := time.Now()
	rec.Data, rec.Updated, rec.LeaseUntil = b, now, now.Add(s.cfg.lease)
	// The log write must happen even when the caller's context ends now:
	// the step's effect is done.
	wctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 30*time.Second)
	defer cancel()
	if err := s.log.Save(wctx, *rec); err != nil {
		return fmt.Errorf("saga %q: logging %q at %s step %d: %w", s.name, rec.ID, rec.State, rec.Step, err)
	}
	return nil
}

// drive runs rec forward or backward to its end.
func (s *Saga[T]) drive(ctx context.Context, rec Record, data T) (Result[T], error) {
	res := Result[T]{ID: rec.ID}
	for rec.State == Running && rec.Step < len(s.steps) {
		if err := ctx.Err(); err != nil {
			return res, fmt.Errorf("saga %q: %q stopped before step %s (Resume goes on): %w", s.name, rec.ID, s.stepName(rec.Step), err)
		}
		st := s.steps[rec.Step]
		if err := s.call(ctx, st.Do, &data); err != nil {
			rec.State, rec.Error = Compensating, st.Name+": "+err.Error()
			res.Err = fmt.Errorf("saga %q: step %s of %q failed: %w", s.name, st.Name, rec.ID, err)
			if err := s.save(ctx, &rec, data); err != nil {
				return res, err
			}
			break
		}
		rec.Step++
		if rec.Step == len(s.steps) {
			rec.State = Completed
		}
		if err := s.save(ctx, &rec, data); err != nil {
			return res, err
		}
	}
	if rec.State == Running { // resumed with every step done
		rec.State = Completed
		if err := s.save(ctx, &rec, data); err != nil {
			return res, err
		}
	}
	if res.Err == nil && rec.Error != "" {
		res.Err = errors.New(rec.Error)
	}
	for rec.State == Compensating {
		if rec.Step == 0 {
			rec.State = Compensated
			if len(rec.Failures) > 0 {
				rec.State = Unresolved
			}
			if err := s.save(ctx, &rec, data); err != nil {
				return res, err
			}
			break
		}
		st := s.steps[rec.Step-1]
		if st.Undo != nil {
			// A compensation runs even when the caller's context is
			// done: leaving a saga half undone is worse.
			if err := s.call(context.WithoutCancel(ctx), st.Undo, &data); err != nil {
				rec.Failures = append(rec.Failures, st.Name+": "+err.Error())
				s.fails.Add(context.Background(), 1, metric.WithAttributes(attribute.String("saga", s.name), attribute.String("step", st.Name)))
				if s.cfg.onUnresolved != nil {
					s.cfg.onUnresolved(rec.ID, st.Name, err)
				}
			}
		}
		rec.Step--
		if err := s.save(ctx, &rec, data); err != nil {
			return res, err
		}
	}
	res.State, res.Data, res.Failures = rec.State, data, rec.Failures
	s.total.Add(context.Background(), 1, metric.WithAttributes(attribute.String("saga", s.name), attribute.String("state", string(rec.State))))
	return res, nil
}

// call runs f, turning a panic into an error.
func (s *Saga[T]) call(ctx context.Context, f func(context.Context, *T) error, data *T) (err error) {
	defer func() {
		if p := recover(); p != nil {
			err = fmt.Errorf("panic: %v", p)
		}
	}()
	return f(ctx, data)
}
