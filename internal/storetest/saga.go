package storetest

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/saga"
)

type trip struct {
	Flight string `json:"flight"`
	Hotel  string `json:"hotel"`
}

// journal records the steps and compensations a saga ran.
type journal struct {
	mu   sync.Mutex
	ran  []string
	fail map[string]error
}

func (j *journal) step(name string, set func(*trip)) func(context.Context, *trip) error {
	return func(_ context.Context, d *trip) error {
		j.mu.Lock()
		defer j.mu.Unlock()
		j.ran = append(j.ran, name)
		if err := j.fail[name]; err != nil {
			return err
		}
		if set != nil {
			set(d)
		}
		return nil
	}
}

func (j *journal) got() []string {
	j.mu.Lock()
	defer j.mu.Unlock()
	return slices.Clone(j.ran)
}

func tripSaga(l saga.Log, j *journal, opts ...saga.Option) *saga.Saga[trip] {
	return saga.New("trip", l, []saga.Step[trip]{
		{Name: "flight", Do: j.step("book-flight", func(d *trip) { d.Flight = "LH123" }), Undo: j.step("cancel-flight", nil)},
		{Name: "hotel", Do: j.step("book-hotel", func(d *trip) { d.Hotel = "H9" }), Undo: j.step("cancel-hotel", nil)},
		{Name: "charge", Do: j.step("charge", nil)},
	}, opts...)
}

// Saga checks a saga log through the saga runner: completion, compensation
// in reverse, unresolved compensations kept, and resumption of a saga
// whose runner died, forward or compensating.
func Saga(t *testing.T, newLog func(t *testing.T) saga.Log) {
	t.Run("completes", func(t *testing.T) {
		l, j := newLog(t), &journal{}
		r, err := tripSaga(l, j).Run(ctxFor(t), "t1", trip{})
		if err != nil || r.State != saga.Completed || r.Data.Hotel != "H9" {
			t.Fatalf("%+v, %v", r, err)
		}
		if got := j.got(); !slices.Equal(got, []string{"book-flight", "book-hotel", "charge"}) {
			t.Errorf("ran %v", got)
		}
		if _, err := tripSaga(l, j).Run(ctxFor(t), "t1", trip{}); !errors.Is(err, saga.ErrExists) {
			t.Errorf("a second Run of one id: %v, want ErrExists", err)
		} else if n := strings.Count(err.Error(), `saga "`) + strings.Count(err.Error(), "saga: "); n != 1 {
			t.Errorf("a second Run of one id: %q names package saga %d times, want once", err, n)
		}
		rec, err := l.Get(ctxFor(t), "trip", "t1")
		if err != nil || rec.State != saga.Completed || rec.Step != 3 {
			t.Errorf("logged %+v, %v", rec, err)
		}
	})
	t.Run("compensates-in-reverse", func(t *testing.T) {
		l, j := newLog(t), &journal{fail: map[string]error{"charge": errors.New("card declined")}}
		r, err := tripSaga(l, j).Run(ctxFor(t), "t2", trip{})
		if err != nil || r.State != saga.Compensated || r.Err == nil {
			t.Fatalf("%+v, %v", r, err)
		}
		if got := j.got(); !slices.Equal(got, []string{"book-flight", "book-hotel", "charge", "cancel-hotel", "cancel-flight"}) {
			t.Errorf("ran %v", got)
		}
		rec, _ := l.Get(ctxFor(t), "trip", "t2")
		if rec.Error != "charge: card declined" {
			t.Errorf("logged error %q", rec.Error)
		}
	})
	t.Run("unresolved-kept", func(t *testing.T) {
		l := newLog(t)
		j := &journal{fail: map[string]error{"charge": errors.New("declined"), "cancel-hotel": errors.New("hotel API down")}}
		var reported []string
		s := tripSaga(l, j, saga.WithOnUnresolved(func(id, step string, err error) { reported = append(reported, id+"/"+step) }))
		r, err := s.Run(ctxFor(t), "t3", trip{})
		if err != nil || r.State != saga.Unresolved || !slices.Equal(r.Failures, []string{"hotel: hotel API down"}) {
			t.Fatalf("%+v, %v", r, err)
		}
		// The other compensation still ran.
		if got := j.got(); got[len(got)-1] != "cancel-flight" {
			t.Errorf("ran %v", got)
		}
		un, err := s.Unresolved(ctxFor(t))
		if err != nil || len(un) != 1 || un[0].ID != "t3" || !slices.Equal(un[0].Failures, r.Failures) {
			t.Errorf("unresolved %+v, %v", un, err)
		}
		if !slices.Equal(reported, []string{"t3/hotel"}) {
			t.Errorf("reported %v", reported)
		}
	})
	// A runner died after the flight step (its log says step 1, lease
	// gone): another resumes it forward, or compensates it.
	dead := func(t *testing.T, l saga.Log, id string) {
		past := time.Now().Add(-time.Hour)
		if err := l.Create(ctxFor(t), saga.Record{Saga: "trip", ID: id, State: saga.Running, Step: 1, Data: []byte(`{"flight":"LH123"}`),
			Owner: "dead-process", LeaseUntil: past, Created: past, Updated: past}); err != nil {
			t.Fatal(err)
		}
	}
	t.Run("resumes-forward", func(t *testing.T) {
		l, j := newLog(t), &journal{}
		dead(t, l, "t4")
		// A live runner's saga is not taken.
		now := time.Now()
		if err := l.Create(ctxFor(t), saga.Record{Saga: "trip", ID: "live", State: saga.Running, Step: 1, Data: []byte(`{}`),
			Owner: "alive", LeaseUntil: now.Add(time.Hour), Created: now, Updated: now}); err != nil {
			t.Fatal(err)
		}
		rs, err := tripSaga(l, j).Resume(ctxFor(t))
		if err != nil || len(rs) != 1 || rs[0].ID != "t4" || rs[0].State != saga.Completed || rs[0].Data.Flight != "LH123" {
			t.Fatalf("%+v, %v", rs, err)
		}
		if got := j.got(); !slices.Equal(got, []string{"book-hotel", "charge"}) {
			t.Errorf("resumed with %v", got)
		}
		if err := l.Save(ctxFor(t), saga.Record{Saga: "trip", ID: "live", State: saga.Running, Owner: "intruder", Data: []byte(`{}`)}); !errors.Is(err, saga.ErrNotOwner) {
			t.Errorf("a save by a non-owner: %v", err)
		}
	})
	t.Run("resumes-compensating", func(t *testing.T) {
		l, j := newLog(t), &journal{}
		dead(t, l, "t5")
		rs, err := tripSaga(l, j, saga.WithResume(saga.Compensate)).Resume(ctxFor(t))
		if err != nil || len(rs) != 1 || rs[0].State != saga.Compensated {
			t.Fatalf("%+v, %v", rs, err)
		}
		if got := j.got(); !slices.Equal(got, []string{"cancel-flight"}) {
			t.Errorf("resumed with %v", got)
		}
	})
	t.Run("claims-are-exclusive", func(t *testing.T) {
		l := newLog(t)
		for i := range 10 {
			dead(t, l, fmt.Sprint("c", i))
		}
		var mu sync.Mutex
		got := map[string]int{}
		var wg sync.WaitGroup
		for i := range 3 {
			wg.Go(func() {
				rs, err := l.Claim(ctxFor(t), "trip", fmt.Sprint("runner", i), time.Now(), time.Minute, 0)
				if err != nil {
					t.Error(err)
				}
				mu.Lock()
				for _, r := range rs {
					got[r.ID]++
				}
				mu.Unlock()
			})
		}
		wg.Wait()
		if len(got) != 10 {
			t.Errorf("%d sagas claimed, want 10", len(got))
		}
		for id, n := range got {
			if n != 1 {
				t.Errorf("%s claimed by %d runners", id, n)
			}
		}
	})
}
