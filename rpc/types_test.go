package rpc_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/rpc"
)

type stockRequest struct {
	SKU string `json:"sku"`
}

type stockLevel struct {
	Units int `json:"units"`
}

// typed asks with an envelope of type typ.
func typed(typ string) rpc.CallOption {
	return rpc.WithEnvelope(acemq.MustEnvelope(acemq.Fields{Type: typ}))
}

// priceAndStock are the handlers of the tests: a price for any SKU but
// "bad" (a failure), a stock level for any SKU.
func priceAndStock() []rpc.TypeHandler {
	return []rpc.TypeHandler{
		rpc.HandleType("pricing.quote", func(_ context.Context, m acemq.Message[priceRequest]) (quote, error) {
			if m.Payload.SKU == "bad" {
				return quote{}, errors.New("no price list")
			}
			return quote{Pence: len(m.Payload.SKU) * 100}, nil
		}),
		rpc.HandleType("stock.level", func(_ context.Context, m acemq.Message[stockRequest]) (stockLevel, error) {
			return stockLevel{Units: 7}, nil
		}),
	}
}

// A responder answers several request types, each decoded into its own
// type and answered with its own reply type; a type nobody registered gets
// a failure reply naming it and is dead-lettered, unless the user decides.
func TestServeTypes(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("types")
		settled := recordSettlements(t, conn)
		responder, err := rpc.ServeTypes(bg, conn, q, priceAndStock(), acemq.WithRetry(retry.Fixed(3, 10*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = responder.Close(bg) })

		prices := open[priceRequest, quote](t, conn, "", q)
		if got, err := prices.Ask(bg, priceRequest{SKU: "ABC"}, typed("pricing.quote")); err != nil || got.Pence != 300 {
			t.Errorf("price: %+v, %v", got, err)
		}
		stock := open[stockRequest, stockLevel](t, conn, "", q)
		if got, err := stock.Ask(bg, stockRequest{SKU: "ABC"}, typed("stock.level")); err != nil || got.Units != 7 {
			t.Errorf("stock: %+v, %v", got, err)
		}
		// A handler's failure, as Serve's: a failure reply, then .dlq.
		var re *rpc.ResponderError
		if _, err := prices.Ask(bg, priceRequest{SKU: "bad"}, typed("pricing.quote")); !errors.As(err, &re) || re.Text != "Error: no price list" {
			t.Errorf("failing price: %v", err)
		}
		// A type nobody registered: the caller hears at once.
		_, err = prices.Ask(bg, priceRequest{SKU: "ABC"}, typed("pricing.discount"))
		want := `Error: rpc: no handler is registered for request type "pricing.discount" (registered: "pricing.quote", "stock.level")`
		if !errors.As(err, &re) || re.Text != want || re.Refused {
			t.Errorf("unknown type: %v, want a failure reply %q", err, want)
		}
		if responder.Answered() != 2 {
			t.Errorf("Answered() = %d, want 2", responder.Answered())
		}
		var all []acemq.Settlement
		testenv.Eventually(t, "the four requests settled", func() bool {
			all = all[:0]
			for _, s := range settled.wait(t, 0) {
				if s.Queue == q { // not the requesters' replies
					all = append(all, s)
				}
			}
			return len(all) >= 4
		})
		d := e.get(contract.DeadLetterQueue(q))
		reason, _ := wire.String(d.Headers["x-acemq-error"])
		if reason != "the handler rejected it: Error: no price list" {
			t.Errorf("first dead letter's reason %q", reason)
		}
		d = e.get(contract.DeadLetterQueue(q))
		reason, _ = wire.String(d.Headers["x-acemq-error"])
		if reason != "the handler reported an unprocessable message: "+want {
			t.Errorf("unknown type's dead letter reason %q", reason)
		}
		count := map[acemq.Outcome]int{}
		for _, s := range all {
			count[s.Outcome]++
		}
		if len(all) != 4 || count[acemq.OutcomeAcked] != 2 || count[acemq.OutcomeRejected] != 2 {
			t.Errorf("settlements %v, want 2 acked and 2 rejected", count)
		}
	})
}

// acemq.WithUnknownType replaces the default: here the responder ignores
// types it does not know (another responder on the same queue may answer
// them), sending no reply.
func TestServeTypesUnknownTypeChoice(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("types-choice")
		seen := make(chan string, 1)
		responder, err := rpc.ServeTypes(bg, conn, q, priceAndStock(),
			acemq.WithUnknownType(func(_ context.Context, m acemq.Message[[]byte]) acemq.Ack {
				seen <- m.Envelope.Type()
				return acemq.Accept()
			}))
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = responder.Close(bg) })
		prices := open[priceRequest, quote](t, conn, "", q)
		_, err = prices.Ask(bg, priceRequest{SKU: "ABC"}, typed("pricing.discount"), rpc.WithTimeout(100*time.Millisecond))
		if !errors.Is(err, rpc.ErrTimeout) {
			t.Errorf("Ask: %v, want no reply (a timeout)", err)
		}
		if typ := <-seen; typ != "pricing.discount" {
			t.Errorf("the unknown-type handler saw %q", typ)
		}
		if n := e.depth(contract.DeadLetterQueue(q)); n != 0 {
			t.Errorf("%d dead letters, want none", n)
		}
	})
}

func TestServeTypesRefuses(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("types-refused")
		for _, tc := range []struct {
			handlers []rpc.TypeHandler
			want     string
		}{
			{nil, "rpc: starting the responder on " + `"` + q + `"` + ": acemq: ConsumeTypes needs at least one handler"},
			{[]rpc.TypeHandler{{}}, "rpc: starting the responder on " + `"` + q + `"` + ": acemq: ConsumeTypes: handler 1 was registered for an empty type"},
			{[]rpc.TypeHandler{rpc.HandleType[priceRequest, quote]("a", nil)}, `the handler of type "a" is nil`},
		} {
			r, err := rpc.ServeTypes(bg, conn, q, tc.handlers)
			if err == nil || !strings.Contains(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
			if r != nil {
				_ = r.Close(bg)
			}
		}
	})
}
