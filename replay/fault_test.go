package replay_test

import (
	"context"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/replay"
)

// The broker drops every connection half-way through a replay. Whatever the
// replay reports, every message is afterwards in the dead-letter queue or on
// the target (possibly in both, never in neither).
func TestFaultReplayConnectionDropLosesNothing(t *testing.T) {
	testenv.Faults(t)
	url := testenv.AMQPURL(t)
	c := brokertest.Connect(t, url)
	q := declareQueues(t, c)
	dlq := contract.DeadLetterQueue(q)
	const total = 100
	ids := map[string]bool{}
	for range total {
		env := acemq.MustEnvelope(acemq.Fields{Reason: "the handler rejected it: no"})
		ids[env.ID()] = true
		deadLetter(t, c, dlq, env, "x")
	}
	waitCount(t, c, dlq, total)

	var calls atomic.Int32
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	res, err := replay.Run(ctx, c, dlq, replay.WithFilter(func(acemq.Envelope) bool {
		if calls.Add(1) == total/2 {
			testenv.Rabbitmqctl(t, "close_all_connections", "replay fault test")
		}
		return true
	}))
	t.Logf("replay stopped: %v (err %v)", res, err)

	// Count with a fresh connection: the first may still be recovering.
	c2 := brokertest.Connect(t, url)
	seen := map[string]int{}
	deadline := time.Now().Add(30 * time.Second)
	for {
		for _, n := range []string{q, dlq} {
			for _, d := range getAll(t, c2, n) {
				seen[acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID).ID()]++
			}
		}
		missing := 0
		for id := range ids {
			if seen[id] == 0 {
				missing++
			}
		}
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d of %d messages were lost", missing, total)
		}
		time.Sleep(100 * time.Millisecond) // unacked deliveries of the dropped channel are still being requeued
	}
	dups := 0
	for _, n := range seen {
		dups += n - 1
	}
	t.Logf("all %d messages accounted for; %d duplicated", total, dups)
}
