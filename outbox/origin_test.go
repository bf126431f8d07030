package outbox_test

import (
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/outbox"
)

// A record goes out with the origin of the relay's connection (WithOrigin),
// unless the application gave the record an origin of its own.
func TestRelayPublishesWithTheConnectionsOrigin(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		const origin = "billing@host-7"
		c := brokertest.Connect(t, url, acemq.WithOrigin(origin))
		q := brokertest.Queue(t, c, "outbox-origin")
		store := outbox.NewMemory()
		pub := outbox.NewPublisher[order](store, "")
		sent, err := pub.Send(t.Context(), nil, q, order{ID: 1})
		if err != nil {
			t.Fatal(err)
		}
		if sent.Origin() != "" {
			t.Errorf("Send returned origin %q; the relay's connection decides it", sent.Origin())
		}
		own := acemq.MustEnvelope(acemq.Fields{Origin: "ledger@host-2"})
		if _, err := pub.Send(t.Context(), nil, q, order{ID: 2}, outbox.WithEnvelope(own)); err != nil {
			t.Fatal(err)
		}
		if n, err := outbox.NewRelay(c, store).Flush(t.Context()); err != nil || n != 2 {
			t.Fatalf("flush: %d, %v", n, err)
		}
		ch := collect(t, c, q)
		got := map[int]string{}
		for range 2 {
			m := next(t, ch)
			got[m.Payload.ID] = m.Envelope.Origin()
		}
		if got[1] != origin {
			t.Errorf("a record without an origin went out with origin %q, want the connection's %q", got[1], origin)
		}
		if got[2] != "ledger@host-2" {
			t.Errorf("a record with its own origin went out with %q, want ledger@host-2", got[2])
		}
	})
}
