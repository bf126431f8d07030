package acemq

import (
	"context"
	"errors"
	"math/rand/v2"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
)

// testHost is the consumer a batcher under test gathers for (batchHost).
type testHost struct {
	state    *engine.Consumer
	stopping chan struct{}
	ctx      context.Context
}

func (h *testHost) State() *engine.Consumer   { return h.state }
func (h *testHost) Stopping() <-chan struct{} { return h.stopping }
func (h *testHost) Context() context.Context  { return h.ctx }

// TestBatcherGivesEachMessageItsOwnAck: workers hand a batcher messages
// concurrently, in an order other than their delivery tags'; the handler
// sees each batch in tag order, and each worker gets back the Ack the
// handler gave its own message, whatever the batches' sizes.
func TestBatcherGivesEachMessageItsOwnAck(t *testing.T) {
	for _, size := range []int{1, 2, 3, 7, 16} {
		t.Run(strconv.Itoa(size), func(t *testing.T) {
			k := &testHost{state: engine.NewConsumer("q", nil), stopping: make(chan struct{}), ctx: context.Background()}
			var mu sync.Mutex
			var unordered []string
			b := &batcher[int]{k: k, clock: driver.RealClock, size: size, window: time.Millisecond, slots: make(chan struct{}, 2),
				h: func(_ context.Context, ms []Message[int]) []Ack {
					acks := make([]Ack, len(ms))
					for i, m := range ms {
						// The Ack names the message it answers.
						acks[i] = Reject(errors.New(strconv.Itoa(m.Payload)))
						if i > 0 && ms[i-1].Payload > m.Payload {
							mu.Lock()
							unordered = append(unordered, strconv.Itoa(ms[i-1].Payload)+" before "+strconv.Itoa(m.Payload))
							mu.Unlock()
						}
					}
					return acks
				}}
			const n = 200
			tags := rand.Perm(n) // the order the workers reach the batcher in
			var wg sync.WaitGroup
			for _, tag := range tags {
				wg.Go(func() {
					// The payload is the delivery tag.
					ack := b.add(Message[int]{Payload: tag}, uint64(tag))
					if ack.Err() == nil || ack.Err().Error() != strconv.Itoa(tag) {
						t.Errorf("message %d got the Ack %v", tag, ack)
					}
				})
			}
			wg.Wait()
			if w := k.state.Waiting(); w != 0 {
				t.Errorf("after every batch was handed over, %d messages still count as waiting for a window", w)
			}
			if len(unordered) > 0 {
				t.Errorf("batches out of delivery order: %v", unordered[:min(len(unordered), 5)])
			}
		})
	}
}

// TestBatcherTurnsAWrongAnswerIntoFatalRejects: a handler that panics or
// answers with a slice of another length rejects every message of the
// batch as unprocessable.
func TestBatcherTurnsAWrongAnswerIntoFatalRejects(t *testing.T) {
	k := &testHost{state: engine.NewConsumer("q", nil), stopping: make(chan struct{}), ctx: context.Background()}
	for name, h := range map[string]func(context.Context, []Message[int]) []Ack{
		"panic": func(context.Context, []Message[int]) []Ack { panic("boom") },
		"short": func(_ context.Context, ms []Message[int]) []Ack { return make([]Ack, len(ms)-1) },
		"long":  func(_ context.Context, ms []Message[int]) []Ack { return make([]Ack, len(ms)+1) },
	} {
		t.Run(name, func(t *testing.T) {
			b := &batcher[int]{k: k, clock: driver.RealClock, size: 2, window: time.Hour, slots: make(chan struct{}, 1), h: h}
			acks := make([]Ack, 2)
			var wg sync.WaitGroup
			for i := range 2 {
				wg.Go(func() { acks[i] = b.add(Message[int]{Payload: i}, uint64(i)) })
			}
			wg.Wait()
			for i, a := range acks {
				if a.Decision() != DecisionReject || !IsFatal(a.Err()) {
					t.Errorf("message %d: %v, want a fatal reject", i, a)
				}
			}
			if name == "panic" {
				var pe *PanicError
				if !errors.As(acks[0].Err(), &pe) || pe.Value != "boom" || len(pe.Stack) == 0 {
					t.Errorf("err %v, want the *PanicError with its stack", acks[0].Err())
				}
			}
		})
	}
}
