package perf

import (
	"context"
	"testing"
	"time"

	"github.com/acemq/acemq"
)

// TestPerMessageOptionsDoNotAllocate: WithPriority and WithExpiration are
// applied by type assertion, like WithEnvelope, and cost no allocation of
// their own; the expiration's decimal string costs at most one.
//
// Under the race detector the counts move by one or two from run to run,
// so there it only logs them; run it without -race to check.
func TestPerMessageOptionsDoNotAllocate(t *testing.T) {
	ctx := context.Background()
	c, err := acemq.Connect(ctx, "perfnull://allocs-opts")
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	p := acemq.NewPublisher[Order](c, "")
	order := NewOrderCached()
	// The least of several measurements: the race detector adds an
	// allocation now and then, never takes one away.
	least := func(f func()) float64 {
		best := testing.AllocsPerRun(100, f)
		for range 4 {
			best = min(best, testing.AllocsPerRun(100, f))
		}
		return best
	}
	plain := least(func() {
		if _, err := p.Send(ctx, "orders", order); err != nil {
			t.Fatal(err)
		}
	})
	prio := least(func() {
		if _, err := p.Send(ctx, "orders", order, acemq.WithPriority(7)); err != nil {
			t.Fatal(err)
		}
	})
	ttl := least(func() {
		if _, err := p.Send(ctx, "orders", order, acemq.WithExpiration(90*time.Second)); err != nil {
			t.Fatal(err)
		}
	})
	t.Logf("Send: %.0f allocations; WithPriority %.0f; WithExpiration %.0f", plain, prio, ttl)
	if raceDetector {
		t.Log("not checked under the race detector: run go test -run TestPerMessageOptionsDoNotAllocate ./internal/perf")
		return
	}
	if prio > plain {
		t.Errorf("WithPriority costs %.0f allocations of its own per Send", prio-plain)
	}
	if ttl > plain+1 {
		t.Errorf("WithExpiration costs %.0f allocations per Send, above the one its decimal string may take", ttl-plain)
	}
}
