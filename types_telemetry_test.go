package acemq_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/brokertest"
	"go.opentelemetry.io/otel/trace"
)

// ConsumeTypes records what Consume records: one process span per
// delivery, whose context the typed handler gets, and the consume metrics
// by outcome, for a registered type and for one nobody registered.
func TestTelemetryConsumeTypes(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newTelRig(t, url)
		var handlerSpan atomic.Value
		k, err := acemq.ConsumeTypes(context.Background(), r.c, r.q, []acemq.TypeHandler{
			// The type defaults to the routing key: the queue's name here.
			acemq.HandleType(r.q, func(ctx context.Context, m acemq.Message[string]) acemq.Ack {
				handlerSpan.Store(trace.SpanContextFromContext(ctx))
				return acemq.Accept()
			}),
		})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Close(context.Background()) })
		_, app := r.publish("hello")
		other := acemq.MustEnvelope(acemq.Fields{Type: "other"})
		if err := brokertest.Publish(context.Background(), r.c, brokertest.Outbound{RoutingKey: r.q, Envelope: other, ContentType: "application/json", Body: []byte(`"x"`)}); err != nil {
			t.Fatal(err)
		}
		r.wait(2)
		proc := r.spanFor(r.q+" process", r.spanFor(r.q+" publish", app).SpanContext())
		r.checkProcessSpan(proc, 1, "acked")
		wantAttr(t, proc, "messaging.acemq.message_type", r.q)
		if got := handlerSpan.Load().(trace.SpanContext); got.SpanID() != proc.SpanContext().SpanID() {
			t.Errorf("the handler's context carries span %s, want the process span %s", got.SpanID(), proc.SpanContext().SpanID())
		}
		r.wantCount("acemq.consume.total", map[string]string{"queue": r.q, "outcome": "acked"}, 1)
		r.wantCount("acemq.consume.total", map[string]string{"queue": r.q, "outcome": "rejected"}, 1)
		r.wantCount("acemq.messages.dead.lettered.total", map[string]string{"queue": r.q, "outcome": "dead_lettered"}, 1)
	})
}

// ConsumeBatch records per message: one process span and one consume
// count per message, by its own outcome.
func TestTelemetryConsumeBatch(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newTelRig(t, url)
		k, err := acemq.ConsumeBatch(context.Background(), r.c, r.q, 2, hour,
			func(_ context.Context, ms []acemq.Message[string]) []acemq.Ack {
				acks := make([]acemq.Ack, len(ms))
				for i, m := range ms {
					if m.Payload == "bad" {
						acks[i] = acemq.Reject(errors.New("bad reading"))
					}
				}
				return acks
			})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = k.Close(context.Background()) })
		_, good := r.publish("good")
		_, bad := r.publish("bad")
		r.wait(2)
		r.checkProcessSpan(r.spanFor(r.q+" process", r.spanFor(r.q+" publish", good).SpanContext()), 1, "acked")
		r.checkProcessSpan(r.spanFor(r.q+" process", r.spanFor(r.q+" publish", bad).SpanContext()), 1, "rejected")
		r.wantCount("acemq.consume.total", map[string]string{"queue": r.q, "outcome": "acked"}, 1)
		r.wantCount("acemq.consume.total", map[string]string{"queue": r.q, "outcome": "rejected"}, 1)
		if n, _ := r.tel.hist(t, "acemq.consume.attempts", map[string]string{"queue": r.q}); n != 2 {
			t.Errorf("acemq.consume.attempts count %d, want 2", n)
		}
	})
}
