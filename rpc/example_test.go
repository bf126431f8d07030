package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/rpc"
	"github.com/acemq/acemq/topology"
)

type PriceRequest struct {
	SKU string `json:"sku"`
}

type Quote struct {
	Pence int `json:"pence"`
}

// A responder on the price-requests queue and a requester asking it, on
// the in-process broker.
func Example() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-rpc")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	// The application declares the request queue; Serve never does.
	if err := topology.New().Queue("price-requests").Apply(ctx, conn); err != nil {
		log.Fatal(err)
	}

	responder, err := rpc.Serve(ctx, conn, "price-requests",
		func(ctx context.Context, m acemq.Message[PriceRequest]) (Quote, error) {
			return Quote{Pence: 250}, nil
		}, acemq.WithConcurrency(4))
	if err != nil {
		log.Fatal(err)
	}
	defer responder.Close(ctx)

	// One requester per connection, built at start-up: it owns a reply
	// queue and a consumer, and serves any number of concurrent calls.
	ask, err := rpc.Open[PriceRequest, Quote](ctx, conn, "", "price-requests")
	if err != nil {
		log.Fatal(err)
	}
	defer ask.Close(ctx)

	quote, err := ask.Ask(ctx, PriceRequest{SKU: "A-1"})
	if err != nil {
		log.Fatal(err)
	}
	// Answered is counted before the reply leaves: no wait is needed.
	fmt.Println(quote.Pence, responder.Answered())
	// Output: 250 1
}

// A responder that fails tells the caller at once, with the reason.
func ExampleResponderError() {
	ctx := context.Background()
	conn, _ := acemq.Connect(ctx, "memory://example-rpc-failure")
	defer conn.Close(ctx)
	_ = topology.New().Queue("stock").Apply(ctx, conn)

	responder, _ := rpc.Serve(ctx, conn, "stock",
		func(ctx context.Context, m acemq.Message[PriceRequest]) (Quote, error) {
			return Quote{}, errors.New("out of stock")
		})
	defer responder.Close(ctx)
	ask, _ := rpc.Open[PriceRequest, Quote](ctx, conn, "", "stock")
	defer ask.Close(ctx)

	_, err := ask.Ask(ctx, PriceRequest{SKU: "A-1"})
	var re *rpc.ResponderError
	if errors.As(err, &re) {
		fmt.Println(re.Text)
	}
	fmt.Println(responder.Answered())
	// Output:
	// Error: out of stock
	// 0
}

// No reply in time is a timeout: it matches rpc.ErrTimeout and
// context.DeadlineExceeded. It says no answer arrived, not that nothing
// happened.
func ExampleWithTimeout() {
	ctx := context.Background()
	conn, _ := acemq.Connect(ctx, "memory://example-rpc-timeout")
	defer conn.Close(ctx)
	_ = topology.New().Queue("nobody-home").Apply(ctx, conn)

	ask, _ := rpc.Open[PriceRequest, Quote](ctx, conn, "", "nobody-home", rpc.WithTimeout(5*time.Second))
	defer ask.Close(ctx)

	_, err := ask.Ask(ctx, PriceRequest{SKU: "A-1"}, rpc.WithTimeout(20*time.Millisecond))
	fmt.Println(errors.Is(err, rpc.ErrTimeout), errors.Is(err, context.DeadlineExceeded), ask.TimedOut())
	// Output: true true 1
}

// The envelope given to Ask is sent as given, except its id and
// correlation, which belong to the call.
func ExampleWithEnvelope() {
	ctx := context.Background()
	conn, _ := acemq.Connect(ctx, "memory://example-rpc-envelope")
	defer conn.Close(ctx)
	_ = topology.New().Queue("typed").Apply(ctx, conn)

	responder, _ := rpc.Serve(ctx, conn, "typed",
		func(ctx context.Context, m acemq.Message[PriceRequest]) (string, error) {
			tenant, _ := m.Envelope.Header("tenant")
			return fmt.Sprintf("%s v%d for %v", m.Envelope.Type(), m.Envelope.Version(), tenant), nil
		})
	defer responder.Close(ctx)
	ask, _ := rpc.Open[PriceRequest, string](ctx, conn, "", "typed")
	defer ask.Close(ctx)

	env := acemq.MustEnvelope(acemq.Fields{Type: "price.request", Version: 2, Headers: map[string]any{"tenant": "acme"}})
	answer, _ := ask.Ask(ctx, PriceRequest{SKU: "A-1"}, rpc.WithEnvelope(env))
	fmt.Println(answer)
	// Output: price.request v2 for acme
}

type StockRequest struct {
	SKU string `json:"sku"`
}

type StockLevel struct {
	Units int `json:"units"`
}

// One responder answering two request types on one queue, each decoded
// into its own request type and answered with its own reply type. A
// caller names the type with WithEnvelope (or with the routing key it
// publishes under); a type nobody registered gets a failure reply at once.
func ExampleServeTypes() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-rpc-types")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("catalogue").Apply(ctx, conn); err != nil {
		log.Fatal(err)
	}
	responder, err := rpc.ServeTypes(ctx, conn, "catalogue", []rpc.TypeHandler{
		rpc.HandleType("price", func(ctx context.Context, m acemq.Message[PriceRequest]) (Quote, error) {
			return Quote{Pence: 250}, nil
		}),
		rpc.HandleType("stock", func(ctx context.Context, m acemq.Message[StockRequest]) (StockLevel, error) {
			return StockLevel{Units: 12}, nil
		}),
	})
	if err != nil {
		log.Fatal(err)
	}
	defer responder.Close(ctx)

	typed := func(typ string) rpc.CallOption {
		return rpc.WithEnvelope(acemq.MustEnvelope(acemq.Fields{Type: typ}))
	}
	prices, err := rpc.Open[PriceRequest, Quote](ctx, conn, "", "catalogue")
	if err != nil {
		log.Fatal(err)
	}
	defer prices.Close(ctx)
	stock, err := rpc.Open[StockRequest, StockLevel](ctx, conn, "", "catalogue")
	if err != nil {
		log.Fatal(err)
	}
	defer stock.Close(ctx)

	quote, err := prices.Ask(ctx, PriceRequest{SKU: "A-1"}, typed("price"))
	if err != nil {
		log.Fatal(err)
	}
	level, err := stock.Ask(ctx, StockRequest{SKU: "A-1"}, typed("stock"))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(quote.Pence, level.Units)
	_, err = prices.Ask(ctx, PriceRequest{SKU: "A-1"}, typed("discount"))
	var failed *rpc.ResponderError
	if errors.As(err, &failed) {
		fmt.Println(failed.Text)
	}
	// Output:
	// 250 12
	// Error: rpc: no handler is registered for request type "discount" (registered: "price", "stock")
}
