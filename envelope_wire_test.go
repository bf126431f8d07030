package acemq_test

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	_ "github.com/acemq/acemq/rabbitmq"
)

// wireConn connects to url and declares a uniquely named, non-durable queue
// that is deleted when the test ends.
func wireConn(t *testing.T, url string) (*acemq.Conn, string) {
	t.Helper()
	ctx := context.Background()
	c, err := acemq.Connect(ctx, url, acemq.WithOrigin("orders@test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	var b [4]byte
	_, _ = rand.Read(b[:])
	q := "acemq-envelope-test-" + hex.EncodeToString(b[:])
	if _, err := brokertest.Driver(c).DeclareQueue(ctx, driver.Queue{Name: q, Durable: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _, _ = brokertest.Driver(c).DeleteQueue(context.Background(), q) })
	return c, q
}

// TestEnvelopeOverTheWire publishes a fully populated envelope through a
// broker and checks what a consumer receives: every header in its contract
// type (strings, int32 counters, int64 first-seen), the application
// headers' own types, and an envelope that reads back as the one sent.
func TestEnvelopeOverTheWire(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c, q := wireConn(t, url)
		ctx := context.Background()
		env := mustEnvelope(t, acemq.Fields{
			Type: "order.placed", Version: 3, CorrelationID: "corr-1", CausationID: "cause-1", Attempt: 2,
			FirstSeen: time.UnixMilli(1767323045678), Claim: "s3://payloads/orders/o-4",
			Route: []string{"validate", "ship"}, RoutePosition: 0, RouteID: "run-1",
			Headers: map[string]any{
				"x-tenant": "acme", "x-count": int32(7), "x-big": int64(1) << 40, "x-ratio": 0.5,
				"x-flag": true, "x-raw": []byte{0, 1, 0xff}, "x-table": map[string]any{"k": "v", "n": int64(1)},
			},
		})
		sent, err := acemq.NewPublisher[string](c, "").Send(ctx, q, "hello", acemq.WithEnvelope(env))
		if err != nil {
			t.Fatal(err)
		}
		d := brokertest.Get(t, c, q)
		want := map[string]any{
			"x-acemq-id": sent.ID(), "x-acemq-type": "order.placed", "x-acemq-version": int32(3),
			"x-acemq-correlation": "corr-1", "x-acemq-causation": "cause-1", "x-acemq-attempt": int32(2),
			"x-acemq-first-seen": int64(1767323045678), "x-acemq-origin": "orders@test",
			"x-acemq-claim": "s3://payloads/orders/o-4", "x-acemq-route": "validate,ship",
			"x-acemq-route-position": int32(0), "x-acemq-route-id": "run-1",
			"x-tenant": "acme", "x-count": int32(7), "x-big": int64(1) << 40, "x-ratio": 0.5,
			"x-flag": true, "x-raw": []byte{0, 1, 0xff}, "x-table": map[string]any{"k": "v", "n": int64(1)},
		}
		for k, w := range want {
			if !sameValue(d.Headers[k], w) {
				t.Errorf("%s arrived as %#v (%T), want %#v (%T)", k, d.Headers[k], d.Headers[k], w, w)
			}
		}
		for k := range d.Headers {
			if _, ok := want[k]; !ok && k != "traceparent" && k != "tracestate" {
				t.Errorf("unexpected header %s = %#v", k, d.Headers[k])
			}
		}
		if d.MessageID != sent.ID() || !d.Persistent || d.ContentType != "application/json" || string(d.Body) != `"hello"` {
			t.Errorf("message-id %q persistent %v content type %q body %s", d.MessageID, d.Persistent, d.ContentType, d.Body)
		}
		got := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
		if diff := envelopeDiff(got, sent); diff != "" {
			t.Errorf("the delivered envelope differs from the sent one: %s", diff)
		}
	})
}

// TestUnknownReservedSurvivesRepublish: a delivery carrying x-acemq-*
// headers this version does not know is republished (as the library does
// for a retry) with them unchanged, while a Publisher does not copy them
// onto a new message.
func TestUnknownReservedSurvivesRepublish(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c, q := wireConn(t, url)
		ctx := context.Background()
		err := brokertest.Driver(c).Publish(ctx, driver.Message{
			RoutingKey: q, MessageID: "m-1", ContentType: "application/json", Body: []byte(`1`),
			Headers: map[string]any{
				"x-acemq-id": "m-1", "x-acemq-attempt": "1", "x-acemq-first-seen": int64(1767323045678),
				"x-acemq-from-v9": "keep me", "x-acemq-replayed-at": int64(1770091506789), "x-app": "mine",
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		d := brokertest.Get(t, c, q)
		env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
		if _, ok := env.Headers()["x-acemq-from-v9"]; ok {
			t.Error("an unknown reserved header reached the application")
		}
		// The library's republish path: same message, next attempt.
		if err := brokertest.Publish(ctx, c, brokertest.Outbound{RoutingKey: q, Envelope: env.Next(), ContentType: d.ContentType, Body: d.Body}); err != nil {
			t.Fatal(err)
		}
		r := brokertest.Get(t, c, q)
		for k, w := range map[string]any{
			"x-acemq-from-v9": "keep me", "x-acemq-replayed-at": int64(1770091506789), "x-app": "mine",
			"x-acemq-attempt": int32(2), "x-acemq-id": "m-1", "x-acemq-first-seen": int64(1767323045678),
		} {
			if !sameValue(r.Headers[k], w) {
				t.Errorf("after a republish %s = %#v (%T), want %#v (%T)", k, r.Headers[k], r.Headers[k], w, w)
			}
		}
		// An application publish with that envelope is a new message.
		if _, err := acemq.NewPublisher[int](c, "").Send(ctx, q, 2, acemq.WithEnvelope(env.Derive())); err != nil {
			t.Fatal(err)
		}
		if _, err := acemq.NewPublisher[int](c, "").Send(ctx, q, 3, acemq.WithEnvelope(env)); err != nil {
			t.Fatal(err)
		}
		for range 2 {
			n := brokertest.Get(t, c, q)
			if _, ok := n.Headers["x-acemq-from-v9"]; ok {
				t.Errorf("an application publish (body %s) carried the unknown header", n.Body)
			}
		}
	})
}

// TestPublisherUnroutableOnEachBroker: mandatory by default on either
// broker; the return is a *driver.ReturnError with code 312.
func TestPublisherUnroutableOnEachBroker(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c, q := wireConn(t, url)
		ctx := context.Background()
		p := acemq.NewPublisher[int](c, "")
		_, err := p.Send(ctx, q+"-nobody", 1)
		var ue *driver.ReturnError
		if !errors.As(err, &ue) || ue.Code != 312 {
			t.Fatalf("Send to an unbound key: %v, want a *driver.ReturnError with code 312", err)
		}
		results, err := p.SendAll(ctx, []acemq.Outgoing[int]{{RoutingKey: q, Payload: 1}, {RoutingKey: q + "-nobody", Payload: 2}, {RoutingKey: q, Payload: 3}})
		var be *acemq.BatchError
		if !errors.As(err, &be) || be.Failed != 1 || be.Confirmed != 2 || results[1].Err == nil || results[0].Err != nil || results[2].Err != nil {
			t.Fatalf("SendAll: %v %+v", err, results)
		}
		if _, err := acemq.NewPublisher[int](c, "", acemq.WithMandatory(false)).Send(ctx, q+"-nobody", 1); err != nil {
			t.Errorf("AllowUnroutable: %v", err)
		}
	})
}
