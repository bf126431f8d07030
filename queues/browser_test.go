package queues_test

import (
	"context"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/queues"
)

// A message that came without an x-acemq-type is moved typed by its new
// routing key while the envelope keeps the type it was read with, and by
// the envelope's type once that is set; a message typed with its routing
// key keeps that type.
func TestMoveTypesAnUntypedMessageByItsTarget(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c := brokertest.Connect(t, url)
		from, to := brokertest.Queue(t, c, "queues-from"), brokertest.Queue(t, c, "queues-to")
		for i, h := range []driver.Table{nil, nil, nil, {wire.HeaderType: from}} {
			if err := brokertest.Driver(c).Publish(ctx, driver.Message{RoutingKey: from, MessageID: string(rune('a' + i)), Headers: h, Body: []byte("{}")}); err != nil {
				t.Fatal(err)
			}
		}
		b, err := queues.Browse(ctx, c, from)
		if err != nil {
			t.Fatal(err)
		}
		defer b.Close()
		var ms []queues.Message
		for len(ms) < 4 {
			m, ok, err := b.Next(ctx)
			if err != nil {
				t.Fatal(err)
			}
			if ok {
				ms = append(ms, m)
			}
		}
		if ms[0].Envelope.Type() != from {
			t.Fatalf("an untyped message reads as type %q, want its routing key %q", ms[0].Envelope.Type(), from)
		}
		changed, err := ms[1].Envelope.Change(func(f *acemq.Fields) { f.Headers["moved"] = true })
		if err != nil {
			t.Fatal(err)
		}
		typed, err := ms[2].Envelope.Change(func(f *acemq.Fields) { f.Type = "order.placed" })
		if err != nil {
			t.Fatal(err)
		}
		for i, env := range []acemq.Envelope{ms[0].Envelope, changed, typed, ms[3].Envelope} {
			if err := b.Move(ctx, ms[i], "", to, env); err != nil {
				t.Fatal(err)
			}
		}
		for i, want := range []string{to, to, "order.placed", from} {
			d := brokertest.Get(t, c, to)
			if d.MessageID != string(rune('a'+i)) || d.Headers[wire.HeaderType] != want {
				t.Errorf("moved message %s is typed %v, want message %c typed %q", d.MessageID, d.Headers[wire.HeaderType], 'a'+i, want)
			}
		}
	})
}
