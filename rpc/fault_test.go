package rpc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/rpc"
)

// The broker drops every connection while a request is held by its
// responder. The call either gets its answer or fails with the timeout
// error, never anything else. Once the connections recover, the same
// requester and responder answer new calls: the driver redeclares the
// generated reply queue and resubscribes both consumers.
func TestFaultConnectionsDropped(t *testing.T) {
	testenv.Faults(t)
	e := newEnv(t, testenv.AMQPURL(t))
	q := e.queue("prices")
	release := make(chan struct{})
	serve(t, e.connect(), q, func(ctx context.Context, m acemq.Message[priceRequest]) (quote, error) {
		if m.Payload.SKU == "held" {
			select {
			case <-release:
			case <-ctx.Done():
			}
		}
		return price(ctx, m)
	})
	r := open[priceRequest, quote](t, e.connect(), "", q)
	if _, err := r.Ask(bg, priceRequest{SKU: "A"}); err != nil {
		t.Fatal(err)
	}

	held := make(chan error, 1)
	go func() {
		_, err := r.Ask(bg, priceRequest{SKU: "held"}, rpc.WithTimeout(20*time.Second))
		held <- err
	}()
	testenv.Eventually(t, "the held call to be outstanding", func() bool { return r.Outstanding() == 1 })
	if !testenv.Rabbitmqctl(t, "close_all_connections", "rpc fault test") {
		t.FailNow()
	}
	close(release)
	err := <-held
	if err != nil && !errors.Is(err, rpc.ErrTimeout) {
		t.Fatalf("the call held across the drop ended with %v; want its answer or the timeout error", err)
	}
	t.Logf("the call held across the drop ended with: %v (nil: answered)", err)

	deadline := time.Now().Add(time.Minute)
	for {
		got, err := r.Ask(bg, priceRequest{SKU: "AB"}, rpc.WithTimeout(2*time.Second))
		if err == nil {
			if got.Pence != 200 {
				t.Fatalf("after recovery: %+v", got)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("no answer within a minute of the connections dropping: %v", err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}
