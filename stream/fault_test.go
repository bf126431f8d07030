package stream_test

import (
	"context"
	"fmt"
	"sync"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/stream"
)

// A reader whose own connection is closed by the broker mid-stream resumes
// by itself: every message is handled, none that was settled is handled
// again, and none is skipped, including what was published while it was
// reconnecting.
func TestFaultReaderConnectionKilledMidStream(t *testing.T) {
	testenv.Faults(t)
	url := testenv.AMQPURL(t)
	admin := brokertest.Connect(t, url)
	q := declare(t, admin)
	const before, after = 300, 100
	publish(t, admin, q, 0, before)

	name := testenv.Unique(t, "stream-reader")
	c := brokertest.Connect(t, url, acemq.WithName(name))
	var mu sync.Mutex
	count := map[int]int{}
	var order []int
	killed := make(chan struct{})
	var once sync.Once
	read(t, c, q, func(_ context.Context, m acemq.Message[event]) acemq.Ack {
		mu.Lock()
		count[m.Payload.N]++
		order = append(order, m.Payload.N)
		n := len(order)
		mu.Unlock()
		if n == before/3 {
			once.Do(func() {
				if testenv.CloseConnection(t, name) == 0 {
					t.Error("no connection named " + name + " to close")
				}
				close(killed)
			})
		}
		return acemq.Accept()
	}, stream.WithOffset(stream.First()), stream.WithPrefetch(25))
	<-killed
	publish(t, admin, q, before, before+after)
	testenv.Eventually(t, fmt.Sprintf("all %d messages", before+after), func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(count) == before+after
	})
	mu.Lock()
	defer mu.Unlock()
	for n, k := range count {
		if k != 1 {
			t.Errorf("message %d was handled %d times; a settled message must not be read again", n, k)
		}
	}
	for i := 1; i < len(order); i++ {
		if order[i] <= order[i-1] {
			t.Fatalf("message %d came after %d: a reader keeps offset order across a reconnection", order[i], order[i-1])
		}
	}
}
