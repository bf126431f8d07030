package rpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/rpc"
	"github.com/google/uuid"
)

// plainPrice answers a raw request body the way price does.
func plainPrice(body []byte) []byte {
	var req priceRequest
	_ = json.Unmarshal(body, &req)
	out, _ := json.Marshal(quote{Pence: 100 * len(req.SKU)})
	return out
}

// 9. A Go requester answered by responders that are not this library:
// one following only the plain AMQP RPC convention (reply-to property in,
// correlation-id property echoed, no headers at all), and one that reads
// only the acemq-reply-to header and answers on x-acemq-correlation only
// (the older family libraries).
func TestInteropForeignResponders(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		foreign := e.connect()

		plain := e.queue("plain")
		rawConsume(t, foreign, plain, func(d driver.Delivery) {
			_ = brokertest.Driver(foreign).Publish(bg, driver.Message{
				RoutingKey: d.ReplyTo, CorrelationID: d.CorrelationID,
				ContentType: "application/json", Body: plainPrice(d.Body),
			})
		})
		headerOnly := e.queue("header-only")
		rawConsume(t, foreign, headerOnly, func(d driver.Delivery) {
			_ = brokertest.Driver(foreign).Publish(bg, driver.Message{
				RoutingKey:  str(d.Headers[rpc.HeaderReplyTo]),
				Headers:     driver.Table{wire.HeaderCorrelation: d.Headers[wire.HeaderCorrelation], wire.HeaderID: uuid.NewString()},
				ContentType: "application/json", Body: plainPrice(d.Body),
			})
		})
		for _, q := range []string{plain, headerOnly} {
			r := open[priceRequest, quote](t, conn, "", q, rpc.WithTimeout(time.Minute))
			got, err := r.Ask(bg, priceRequest{SKU: "ABC"})
			if err != nil || got.Pence != 300 {
				t.Fatalf("%s: Ask = %+v, %v", q, got, err)
			}
		}
	})
}

// 9. A Go responder answering clients that are not this library: a plain
// AMQP RPC client (reply-to and correlation-id only, no headers), and one
// that names its reply queue only in the acemq-reply-to header.
func TestInteropForeignClients(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("prices")
		responder := serve(t, conn, q, price)
		client := e.connect()
		replies := e.queue("replies")

		if err := brokertest.Driver(client).Publish(bg, driver.Message{
			RoutingKey: q, ReplyTo: replies, CorrelationID: "plain-1",
			ContentType: "application/json", Body: []byte(`{"sku":"AB"}`),
		}); err != nil {
			t.Fatal(err)
		}
		d := e.get(replies)
		if d.CorrelationID != "plain-1" || string(d.Body) != `{"pence":200}` {
			t.Fatalf("plain client got correlation-id %q body %q", d.CorrelationID, d.Body)
		}

		if err := brokertest.Driver(client).Publish(bg, driver.Message{
			RoutingKey: q, Headers: driver.Table{rpc.HeaderReplyTo: replies, wire.HeaderCorrelation: "header-1"},
			ContentType: "application/json", Body: []byte(`{"sku":"ABC"}`),
		}); err != nil {
			t.Fatal(err)
		}
		d = e.get(replies)
		if str(d.Headers[wire.HeaderCorrelation]) != "header-1" || d.CorrelationID != "header-1" || string(d.Body) != `{"pence":300}` {
			t.Fatalf("header-only client got correlation %v, correlation-id %q, body %q", d.Headers[wire.HeaderCorrelation], d.CorrelationID, d.Body)
		}
		if responder.Answered() != 2 || responder.Unanswerable() != 0 {
			t.Fatalf("Answered %d Unanswerable %d", responder.Answered(), responder.Unanswerable())
		}
	})
}

// 9. A reply is matched by x-acemq-correlation as written, else the AMQP
// correlation-id property, else x-acemq-causation, in that order (docs/wire.md
// §8.2).
func TestInteropCorrelationSources(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("held")
		requests := make(chan driver.Delivery, 8)
		foreign := e.connect()
		rawConsume(t, foreign, q, func(d driver.Delivery) { requests <- d })
		r := open[priceRequest, quote](t, conn, "", q, rpc.WithTimeout(time.Minute))

		type answer struct {
			sku string
			q   quote
			err error
		}
		answers := make(chan answer, 8)
		ask := func(sku string) string {
			go func() {
				got, err := r.Ask(bg, priceRequest{SKU: sku})
				answers <- answer{sku, got, err}
			}()
			d := <-requests
			return d.CorrelationID
		}
		reply := func(pence int, corrHeader, corrProperty, causation string) {
			h := driver.Table{wire.HeaderID: uuid.NewString()}
			if corrHeader != "" {
				h[wire.HeaderCorrelation] = corrHeader
			}
			if causation != "" {
				h[wire.HeaderCausation] = causation
			}
			body, _ := json.Marshal(quote{Pence: pence})
			if err := brokertest.Driver(foreign).Publish(bg, driver.Message{RoutingKey: r.ReplyQueue(), CorrelationID: corrProperty, Headers: h, ContentType: "application/json", Body: body}); err != nil {
				t.Fatal(err)
			}
		}
		expect := func(sku string, pence int) {
			t.Helper()
			a := <-answers
			if a.err != nil || a.sku != sku || a.q.Pence != pence {
				t.Fatalf("got %+v; want %s answered with %d", a, sku, pence)
			}
		}

		// Each source on its own.
		u := ask("header")
		reply(1, u, "", "")
		expect("header", 1)
		u = ask("property")
		reply(2, "", u, "")
		expect("property", 2)
		u = ask("causation")
		reply(3, "", "", u)
		expect("causation", 3)
		// A reply whose id is its own correlation (nothing written) still
		// matches by its property.
		u = ask("defaulted")
		reply(4, "", u, "")
		expect("defaulted", 4)

		// The order: header before property before causation.
		u1, u2 := ask("one"), ask("two")
		reply(10, u1, u2, "")
		expect("one", 10)
		u3 := ask("three")
		reply(20, "", u2, u3)
		expect("two", 20)
		reply(30, "unknown-"+u3, "unknown", u3)
		expect("three", 30)

		// A reply nobody waits for is accepted and counted.
		reply(40, u1, "", "")
		testenv.Eventually(t, "the stray reply to be counted", func() bool { return r.Unmatched() == 1 })
	})
}

// 9. The whole family's shape end to end: a Go requester and a Go
// responder on two connections, through a named exchange.
func TestInteropThroughAnExchange(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		q := e.queue("prices")
		if err := brokertest.Driver(e.admin).Bind(bg, driver.Binding{Queue: q, Exchange: "amq.topic", RoutingKey: "price.#"}); err != nil {
			t.Fatal(err)
		}
		serve(t, e.connect(), q, func(_ context.Context, m acemq.Message[priceRequest]) (quote, error) {
			if m.RoutingKey != "price.request" || m.Exchange != "amq.topic" {
				return quote{}, errors.New("wrong route: " + m.Exchange + " " + m.RoutingKey)
			}
			return quote{Pence: 7}, nil
		})
		r := open[priceRequest, quote](t, e.connect(), "amq.topic", "price.request")
		if got, err := r.Ask(bg, priceRequest{SKU: "A"}); err != nil || got.Pence != 7 {
			t.Fatalf("Ask = %+v, %v", got, err)
		}
	})
}
