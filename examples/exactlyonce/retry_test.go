package main

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/inbox"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
)

// flakyStore fails its first Claim, as a database does during a failover.
type flakyStore struct {
	inbox.Store
	failed atomic.Bool
}

func (s *flakyStore) Claim(ctx context.Context, consumer, key, token string, now time.Time, lease time.Duration) (inbox.State, error) {
	if s.failed.CompareAndSwap(false, true) {
		return 0, errors.New("driver: bad connection")
	}
	return s.Store.Claim(ctx, consumer, key, token, now, lease)
}

// A brief store failure is retried by the example's consumer, not
// dead-lettered: its retry policy allows more than one attempt.
func TestBriefStoreFailureIsRetried(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		conn := brokertest.Connect(t, url)
		ctx := context.Background()
		queue := brokertest.Queue(t, conn, "exactlyonce-retry")
		settled := make(chan acemq.Settlement, 16)
		defer conn.OnSettle(func(s acemq.Settlement) {
			if s.Queue == queue {
				settled <- s
			}
		})()
		a := &app{charged: map[string]int{}}
		h, err := a.handler(inbox.New(&flakyStore{Store: inbox.NewMemory()}, "payments"))
		if err != nil {
			t.Fatal(err)
		}
		consumer, err := consume(ctx, conn, queue, h)
		if err != nil {
			t.Fatal(err)
		}
		defer brokertest.Stop(t, consumer)
		if _, err := acemq.NewPublisher[OrderPlaced](conn, "").Send(ctx, queue, OrderPlaced{Order: "order-1", Amount: 1250}); err != nil {
			t.Fatal(err)
		}
		for {
			select {
			case s := <-settled:
				switch s.Outcome {
				case acemq.OutcomeRetried:
					continue
				case acemq.OutcomeAcked:
					a.mu.Lock()
					got := a.charged["order-1"]
					a.mu.Unlock()
					if got != 1250 {
						t.Errorf("charged %d, want 1250", got)
					}
					return
				default:
					t.Fatalf("a brief store failure ended %s: %s", s.Outcome, s.Reason)
				}
			case <-time.After(testenv.Patience):
				t.Fatal("no settlement")
			}
		}
	})
}
