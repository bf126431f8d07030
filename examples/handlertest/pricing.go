// Package handlertest shows how to test a consumer's handler, with the
// handler of an order-pricing consumer: Pricer.Handle prices each order
// with a price list and publishes the priced order.
//
// handler_test.go tests it two ways: directly, calling the handler with an
// acemq.Message literal and looking at the Ack it returns (its Decision and
// Err), which needs no broker at all; and end to end on a memory:// broker
// of the test's own, with package acemqtest, which shows what the consumer
// really does with those decisions: the retries, the dead letter, the
// published result.
//
//	go test ./examples/handlertest
package handlertest

import (
	"context"
	"errors"
	"fmt"

	"github.com/acemq/acemq"
)

// Order is what the consumer receives.
type Order struct {
	ID    string `json:"id"`
	Lines []Line `json:"lines"`
}

// Line is a quantity of one SKU.
type Line struct {
	SKU      string `json:"sku"`
	Quantity int    `json:"quantity"`
}

// PricedOrder is what the handler publishes for an order it priced.
type PricedOrder struct {
	ID    string `json:"id"`
	Pence int    `json:"pence"`
}

// ErrUnknownSKU is returned, wrapped or not, by a PriceList for a SKU it
// does not sell.
var ErrUnknownSKU = errors.New("unknown SKU")

// PriceList is the price service: the price of one unit of a SKU, in
// pence.
type PriceList interface {
	Price(ctx context.Context, sku string) (int, error)
}

// Sender publishes priced orders; an *acemq.Publisher[PricedOrder] is one.
type Sender interface {
	Send(ctx context.Context, key string, v PricedOrder, opts ...acemq.SendOption) (acemq.Envelope, error)
}

// PricedKey is the routing key priced orders are published with.
const PricedKey = "order.priced"

// Pricer prices orders.
type Pricer struct {
	Prices PriceList
	Priced Sender
}

// Handle is the consumer's handler, an acemq.Handler[Order]. It prices
// every line of the order and publishes the priced order, as a message
// caused by the order (Envelope.Derive). An unknown SKU rejects the order:
// no retry can fix it, so it goes to the queue's dead-letter queue at once.
// Any other failure, of the price list or of the publish, asks for a retry
// through the consumer's retry policy.
func (p *Pricer) Handle(ctx context.Context, m acemq.Message[Order]) acemq.Ack {
	total := 0
	for _, l := range m.Payload.Lines {
		price, err := p.Prices.Price(ctx, l.SKU)
		switch {
		case errors.Is(err, ErrUnknownSKU):
			return acemq.Reject(fmt.Errorf("order %s: %w", m.Payload.ID, err))
		case err != nil:
			return acemq.Retry(fmt.Errorf("order %s: the price of %s: %w", m.Payload.ID, l.SKU, err))
		}
		total += price * l.Quantity
	}
	priced := PricedOrder{ID: m.Payload.ID, Pence: total}
	if _, err := p.Priced.Send(ctx, PricedKey, priced, acemq.WithEnvelope(m.Envelope.Derive())); err != nil {
		return acemq.Retry(fmt.Errorf("order %s: publishing the priced order: %w", m.Payload.ID, err))
	}
	return acemq.Accept()
}
