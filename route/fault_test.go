package route_test

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/route"
)

// The broker drops every connection while runs are between steps. Every
// run still reaches its last step (at least once).
func TestFaultConnectionDropMidRunLosesNoRun(t *testing.T) {
	testenv.Faults(t)
	url := testenv.AMQPURL(t)
	c, _ := connect(t, url)
	ctx := context.Background()
	p := pipeline(t, c, "a", "b")
	const runs = 40
	var calls atomic.Int32
	var mu sync.Mutex
	finished := map[string]int{}
	ca, err := route.Step(ctx, p, "a", func(ctx context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
		if calls.Add(1) == runs/2 {
			testenv.Rabbitmqctl(t, "close_all_connections", "route fault test")
		}
		return route.Forward(m.Payload), nil
	}, acemq.WithRetry(retry.Fixed(5, 100*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	cb, err := route.Step(ctx, p, "b", func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
		mu.Lock()
		finished[m.Envelope.Fields().RouteID]++
		mu.Unlock()
		return route.End[Order](), nil
	})
	if err != nil {
		t.Fatal(err)
	}
	defer brokertest.Stop(t, ca, cb)
	var started []string
	for range runs {
		id, err := p.Start(ctx, Order{ID: "o"})
		if err != nil {
			t.Fatal(err)
		}
		started = append(started, id)
	}
	deadline := time.Now().Add(60 * time.Second)
	for {
		mu.Lock()
		missing := 0
		for _, id := range started {
			if finished[id] == 0 {
				missing++
			}
		}
		dups := 0
		for _, n := range finished {
			dups += n - 1
		}
		mu.Unlock()
		if missing == 0 {
			t.Logf("all %d runs finished; %d finished twice", runs, dups)
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d runs never reached the last step", missing, runs)
		}
		time.Sleep(100 * time.Millisecond)
	}
}
