package acemq_test

import (
	"context"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
)

// TestSendAllLargerThanMaxOutstanding: a batch of more messages than the
// connection lets await a confirm (WithMaxOutstanding) is sent whole, the
// window sliding inside the one call; before, the batch waited for a
// permit only its own, not yet awaited, confirms could give back, and
// failed after the confirm timeout (10 s).
func TestSendAllLargerThanMaxOutstanding(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url, acemq.WithMaxOutstanding(4))
		q := brokertest.Queue(t, c, "window")
		p := acemq.NewPublisher[string](c, "")
		batch := make([]acemq.Outgoing[string], 50)
		for i := range batch {
			batch[i] = acemq.Outgoing[string]{RoutingKey: q, Payload: "m"}
		}
		// Well within the confirm timeout: a batch stuck on its permits
		// fails here.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rs, err := p.SendAll(ctx, batch)
		if err != nil {
			t.Fatalf("SendAll of %d with 4 outstanding: %v", len(batch), err)
		}
		for i, r := range rs {
			if r.Err != nil || r.Envelope.ID() == "" {
				t.Fatalf("message %d: %+v", i, r)
			}
		}
		testenv.Eventually(t, "50 messages on the queue", func() bool { return brokertest.Depth(t, c, q) == len(batch) })
		// And the permits are all given back: a second batch goes too.
		if _, err := p.SendAll(ctx, batch[:10]); err != nil {
			t.Fatalf("the next SendAll: %v", err)
		}
	})
}
