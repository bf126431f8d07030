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

// Pausing a consumer with ordered keys: the deliveries queued behind a
// running key go back to the queue (they had not started), Pause returns
// once the running handler has, and after Resume every message of the key
// runs, in order.
func TestOrderKeyPauseAndResume(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "ordered-pause")
		pub := acemq.NewPublisher[keyed](c, "")
		const n = 6
		for i := range n {
			if _, err := pub.Send(context.Background(), q, keyed{Key: "a", N: i}); err != nil {
				t.Fatal(err)
			}
		}
		var mu sync.Mutex
		var got []int
		redelivered := 0
		started, release := make(chan struct{}), make(chan struct{})
		cons, err := acemq.Consume(context.Background(), c, q, func(_ context.Context, m acemq.Message[keyed]) acemq.Ack {
			if m.Payload.N == 0 && !m.Redelivered {
				close(started)
				<-release
			}
			mu.Lock()
			got = append(got, m.Payload.N)
			if m.Redelivered {
				redelivered++
			}
			mu.Unlock()
			return acemq.Accept()
		}, acemq.WithConcurrency(3), acemq.WithPrefetch(10), acemq.WithOrderKey(func(acemq.Message[[]byte]) string { return "a" }))
		if err != nil {
			t.Fatal(err)
		}
		defer brokertest.Stop(t, cons)
		<-started
		// Let the other workers queue what arrives behind key a.
		testenv.Eventually(t, "the prefetched deliveries to be taken up", func() bool {
			return brokertest.Depth(t, c, q) == 0
		})
		paused := make(chan error, 1)
		go func() { paused <- cons.Pause(context.Background()) }()
		testenv.Eventually(t, "the consumer to pause", cons.Paused)
		close(release) // only now: what waits behind key a goes back
		if err := <-paused; err != nil {
			t.Fatal(err)
		}
		mu.Lock()
		if fmt.Sprint(got) != "[0]" {
			t.Errorf("handled %v by the time Pause returned; what waited behind the key must go back, not run", got)
		}
		mu.Unlock()
		if err := cons.Resume(context.Background()); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "every message", func() bool {
			mu.Lock()
			defer mu.Unlock()
			return len(got) == n
		})
		mu.Lock()
		defer mu.Unlock()
		if fmt.Sprint(got) != "[0 1 2 3 4 5]" {
			t.Errorf("key a ran in the order %v", got)
		}
		if redelivered != n-1 {
			t.Errorf("%d of the %d messages queued behind the key came back redelivered; all must have gone back at the pause", redelivered, n-1)
		}
	})
}
