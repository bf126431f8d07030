package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/rpc"
	"github.com/google/uuid"
)

// A caller tells a refusal (rpc.Refuse, an expected answer) from a
// responder that failed (an error, a panic): the refusal's reply carries
// acemq-error-kind = refused, and its *ResponderError is Refused and
// matches ErrRefused; a failure's is neither.
func TestResponderErrorTellsRefusalFromFailure(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("prices")
		serve(t, conn, q, func(_ context.Context, m acemq.Message[priceRequest]) (quote, error) {
			switch m.Payload.SKU {
			case "unknown":
				return quote{}, rpc.Refuse(fmt.Errorf("unknown SKU %q", m.Payload.SKU))
			case "panic":
				panic("the price table is nil")
			}
			return quote{}, errors.New("the price service is down")
		})
		r := open[priceRequest, quote](t, e.connect(), "", q)
		for _, c := range []struct {
			sku     string
			refused bool
		}{{"unknown", true}, {"broken", false}, {"panic", false}} {
			_, err := r.Ask(bg, priceRequest{SKU: c.sku})
			var re *rpc.ResponderError
			if !errors.As(err, &re) {
				t.Fatalf("%s: %v, want a *ResponderError", c.sku, err)
			}
			if re.Refused != c.refused || errors.Is(err, rpc.ErrRefused) != c.refused {
				t.Errorf("%s: Refused %v, errors.Is(err, ErrRefused) %v; want %v (%v)", c.sku, re.Refused, errors.Is(err, rpc.ErrRefused), c.refused, err)
			}
		}

		// On the wire: the refusal's reply has the header, a failure's not.
		replies := e.queue("replies")
		for _, sku := range []string{"unknown", "broken"} {
			if err := brokertest.Publish(bg, conn, brokertest.Outbound{RoutingKey: q, Body: []byte(`{"sku":"` + sku + `"}`), ReplyTo: replies, CorrelationID: sku}); err != nil {
				t.Fatal(err)
			}
			d := e.get(replies)
			kind, has := d.Headers[rpc.HeaderErrorKind]
			switch {
			case sku == "unknown" && str(kind) != "refused":
				t.Errorf("the refusal's reply: %s = %v, want refused", rpc.HeaderErrorKind, kind)
			case sku == "broken" && has:
				t.Errorf("a failure's reply carries %s = %v", rpc.HeaderErrorKind, kind)
			}
		}
	})
}

// A failure reply from a responder that writes no acemq-error-kind (a
// sibling library, a hand-written responder) reads as before: a
// *ResponderError with the text, not refused; one that writes
// acemq-error-kind = refused is a refusal, whoever wrote it.
func TestResponderErrorFromForeignResponder(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		foreign := e.connect()
		for _, c := range []struct {
			kind    any
			refused bool
		}{{nil, false}, {"refused", true}, {"something-newer", false}} {
			q := e.queue("foreign")
			rawConsume(t, foreign, q, func(d driver.Delivery) {
				h := driver.Table{rpc.HeaderError: "ValueError: unknown SKU", wire.HeaderID: uuid.NewString()}
				if c.kind != nil {
					h[rpc.HeaderErrorKind] = c.kind
				}
				_ = brokertest.Driver(foreign).Publish(bg, driver.Message{
					RoutingKey: d.ReplyTo, CorrelationID: d.CorrelationID, Headers: h,
					ContentType: "application/json", Body: []byte(`{}`),
				})
			})
			r := open[priceRequest, quote](t, conn, "", q, rpc.WithTimeout(time.Minute))
			_, err := r.Ask(bg, priceRequest{SKU: "X"})
			var re *rpc.ResponderError
			if !errors.As(err, &re) || re.Text != "ValueError: unknown SKU" {
				t.Fatalf("kind %v: %v, want a *ResponderError with the reply's text", c.kind, err)
			}
			if re.Refused != c.refused || errors.Is(err, rpc.ErrRefused) != c.refused {
				t.Errorf("kind %v: Refused %v, Is(ErrRefused) %v; want %v", c.kind, re.Refused, errors.Is(err, rpc.ErrRefused), c.refused)
			}
		}
	})
}
