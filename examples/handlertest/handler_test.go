package handlertest

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// TestHandle calls the handler directly, with a message literal: no
// broker, no consumer, just the decision.
func TestHandle(t *testing.T) {
	errDown := errors.New("the price service is down")
	for _, tc := range []struct {
		name     string
		lines    []Line
		prices   PriceList
		sendErr  error
		decision acemq.Decision
		err      error // what the Ack's Err wraps
		sent     *PricedOrder
	}{
		{
			name:     "priced",
			lines:    []Line{{"A-1", 2}, {"B-2", 1}},
			prices:   &priceList{prices: map[string]int{"A-1": 250, "B-2": 1000}},
			decision: acemq.DecisionAccept,
			sent:     &PricedOrder{ID: "o-1", Pence: 1500},
		},
		{
			name:     "unknown SKU",
			lines:    []Line{{"A-1", 2}, {"Z-9", 1}},
			prices:   &priceList{prices: map[string]int{"A-1": 250}},
			decision: acemq.DecisionReject,
			err:      ErrUnknownSKU,
		},
		{
			name:     "price service down",
			lines:    []Line{{"A-1", 2}},
			prices:   &priceList{prices: map[string]int{"A-1": 250}, down: 1, downErr: errDown},
			decision: acemq.DecisionRetry,
			err:      errDown,
		},
		{
			name:     "publish fails",
			lines:    []Line{{"A-1", 2}},
			prices:   &priceList{prices: map[string]int{"A-1": 250}},
			sendErr:  acemq.ErrBlocked,
			decision: acemq.DecisionRetry,
			err:      acemq.ErrBlocked,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			env, err := acemq.NewEnvelope(acemq.Fields{ID: "m-1", Type: "order.placed"})
			if err != nil {
				t.Fatal(err)
			}
			sender := &sender{err: tc.sendErr}
			p := &Pricer{Prices: tc.prices, Priced: sender}

			ack := p.Handle(t.Context(), acemq.Message[Order]{
				Payload:  Order{ID: "o-1", Lines: tc.lines},
				Envelope: env,
				Queue:    "orders.new",
			})

			if ack.Decision() != tc.decision {
				t.Errorf("decision %s (%v), want %s", ack.Decision(), ack.Err(), tc.decision)
			}
			if !errors.Is(ack.Err(), tc.err) {
				t.Errorf("Err() = %v, want %v", ack.Err(), tc.err)
			}
			switch {
			case tc.sent == nil && sender.sent != nil:
				t.Errorf("sent %+v, want nothing sent", *sender.sent)
			case tc.sent != nil && (sender.sent == nil || *sender.sent != *tc.sent):
				t.Errorf("sent %+v, want %+v", sender.sent, *tc.sent)
			}
		})
	}
}

// TestHandleOnTheBroker runs the handler in a consumer on a memory://
// broker of the test's own, to see what the consumer does with its
// decisions.
func TestHandleOnTheBroker(t *testing.T) {
	ctx := t.Context()
	conn := acemqtest.Connect(t, acemqtest.URL(t))
	acemqtest.Declare(t, conn, topology.New().
		Exchange("shop", topology.ExchangeTopic).
		Queue("orders.new", topology.WithDeadLettering(true)).
		Bind("shop", "orders.new", "order.placed").
		Queue("orders.priced").
		Bind("shop", "orders.priced", PricedKey))
	settled := acemqtest.Record(t, conn)

	// The price service fails its first call: o-1's first attempt.
	prices := &priceList{prices: map[string]int{"A-1": 250, "B-2": 1000}, down: 1, downErr: errors.New("the price service is down")}
	p := &Pricer{Prices: prices, Priced: acemq.NewPublisher[PricedOrder](conn, "shop")}
	consumer, err := acemq.Consume(ctx, conn, "orders.new", p.Handle,
		acemq.WithRetry(retry.Fixed(3, 10*time.Millisecond)))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { // before Declare's clean-up deletes the queue
		ctx, cancel := context.WithTimeout(context.Background(), acemqtest.Timeout)
		defer cancel()
		if err := consumer.Close(ctx); err != nil {
			t.Error(err)
		}
	})

	orders := acemq.NewPublisher[Order](conn, "shop")
	sent := map[string]acemq.Envelope{} // by order id
	for _, o := range []Order{
		{ID: "o-1", Lines: []Line{{"A-1", 2}}},
		{ID: "o-2", Lines: []Line{{"Z-9", 1}}},
		{ID: "o-3", Lines: []Line{{"B-2", 1}, {"A-1", 1}}},
	} {
		env, err := orders.Send(ctx, "order.placed", o)
		if err != nil {
			t.Fatal(err)
		}
		sent[o.ID] = env
	}
	acemqtest.WaitIdle(t, conn, consumer)

	// o-1 retried once then acked, o-2 rejected, o-3 acked.
	for outcome, want := range map[acemq.Outcome]int{
		acemq.OutcomeAcked:    2,
		acemq.OutcomeRetried:  1,
		acemq.OutcomeRejected: 1,
	} {
		if got := settled.Count(outcome); got != want {
			t.Errorf("%d settlements %s, want %d: %v", got, outcome, want, describe(settled.All()))
		}
	}

	got := map[string]int{}
	for _, m := range acemqtest.Peek(t, conn, "orders.priced") {
		var po PricedOrder
		if err := json.Unmarshal(m.Body, &po); err != nil {
			t.Fatal(err)
		}
		got[po.ID] = po.Pence
		// Caused by its order, in the order's conversation.
		if order := sent[po.ID]; m.Envelope.CausationID() != order.ID() || m.Envelope.CorrelationID() != order.CorrelationID() {
			t.Errorf("%s's priced order has causation %q and correlation %q, want the order's id and correlation %q, %q",
				po.ID, m.Envelope.CausationID(), m.Envelope.CorrelationID(), order.ID(), order.CorrelationID())
		}
	}
	if len(got) != 2 || got["o-1"] != 500 || got["o-3"] != 1250 {
		t.Errorf("orders.priced holds %v, want o-1 at 500 and o-3 at 1250", got)
	}

	dead := acemqtest.Peek(t, conn, contract.DeadLetterQueue("orders.new"))
	if len(dead) != 1 {
		t.Fatalf("orders.new.dlq holds %d messages, want o-2's", len(dead))
	}
	if r := dead[0].Envelope.Reason(); !strings.HasPrefix(r, "the handler rejected it: ") || !strings.Contains(r, "order o-2: unknown SKU") {
		t.Errorf("the dead letter's reason is %q", r)
	}
}

// priceList is a PriceList whose next down calls fail with downErr.
type priceList struct {
	mu      sync.Mutex
	prices  map[string]int
	down    int
	downErr error
}

func (l *priceList) Price(ctx context.Context, sku string) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.down > 0 {
		l.down--
		return 0, l.downErr
	}
	p, ok := l.prices[sku]
	if !ok {
		return 0, fmt.Errorf("%w %s", ErrUnknownSKU, sku)
	}
	return p, ctx.Err()
}

// sender is a Sender that keeps what it was given, or fails with err. It
// cannot see the envelope the handler asked for (a SendOption is opaque):
// the test on the broker checks that.
type sender struct {
	err  error
	sent *PricedOrder
}

func (s *sender) Send(ctx context.Context, key string, v PricedOrder, opts ...acemq.SendOption) (acemq.Envelope, error) {
	if s.err != nil {
		return acemq.Envelope{}, s.err
	}
	if key != PricedKey {
		return acemq.Envelope{}, fmt.Errorf("sent with the routing key %q, want %q", key, PricedKey)
	}
	s.sent = &v
	return acemq.Envelope{}, ctx.Err()
}

func describe(all []acemq.Settlement) string {
	var b strings.Builder
	for _, s := range all {
		fmt.Fprintf(&b, "\n  %s attempt %d: %s %v", s.Envelope.ID(), s.Envelope.Attempt(), s.Outcome, s.Err)
	}
	return b.String()
}
