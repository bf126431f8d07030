package acemq_test

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
)

type keyed struct {
	Key string `json:"key"`
	N   int    `json:"n"`
}

// WithOrderKey with several handlers: one key never runs twice at once or
// out of order; different keys run in parallel (the first message of key a
// waits until one of key b has started, which with per-key order but no
// parallelism would never happen).
func TestOrderKeyWithConcurrency(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "ordered")
		const perKey = 15
		keys := []string{"a", "b", "c", "d"}
		pub := acemq.NewPublisher[keyed](c, "")
		for i := range perKey {
			for _, k := range keys {
				if _, err := pub.Send(context.Background(), q, keyed{Key: k, N: i}); err != nil {
					t.Fatal(err)
				}
			}
		}
		var mu sync.Mutex
		running := map[string]int{}
		got := map[string][]int{}
		total := 0
		bStarted := make(chan struct{})
		var once sync.Once
		cons, err := acemq.Consume(context.Background(), c, q, func(_ context.Context, m acemq.Message[keyed]) acemq.Ack {
			k := m.Payload.Key
			mu.Lock()
			running[k]++
			if running[k] > 1 {
				t.Errorf("two messages of key %s ran at once", k)
			}
			got[k] = append(got[k], m.Payload.N)
			mu.Unlock()
			if k == "b" {
				once.Do(func() { close(bStarted) })
			}
			if k == "a" && m.Payload.N == 0 {
				select {
				case <-bStarted:
				case <-time.After(testenv.Patience):
					t.Error("key b never started while key a ran: different keys must run in parallel")
				}
			}
			mu.Lock()
			running[k]--
			total++
			mu.Unlock()
			return acemq.Accept()
		}, acemq.WithConcurrency(4), acemq.WithPrefetch(16), acemq.WithOrderKey(func(m acemq.Message[[]byte]) string {
			// The raw body: {"key":"a",…}.
			_, rest, _ := strings.Cut(string(m.Payload), `"key":"`)
			k, _, _ := strings.Cut(rest, `"`)
			return k
		}))
		if err != nil {
			t.Fatal(err)
		}
		defer brokertest.Stop(t, cons)
		testenv.Eventually(t, "every message", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return total == perKey*len(keys)
		})
		mu.Lock()
		defer mu.Unlock()
		for _, k := range keys {
			if fmt.Sprint(got[k]) != fmt.Sprint([]int{0, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14}) {
				t.Errorf("key %s ran in the order %v", k, got[k])
			}
		}
	})
}
