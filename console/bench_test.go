package console_test

import (
	"context"
	"fmt"
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/console"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/topology"
)

// BenchmarkPeek is the cost of one look at a dead-letter queue of 1000
// messages on RabbitMQ: the console's page of the queue (read, group, put
// back, as JSON) beside raw amqp091-go doing the same reading (basic.get
// each without acknowledging, then one nack putting them all back). Run
// it several times: the machine is shared.
//
//	go test -run '^$' -bench BenchmarkPeek -count 5 ./console
func BenchmarkPeek(b *testing.B) {
	const n = 1000
	url := testenv.AMQPURL(b)
	conn := brokertest.Connect(b, url)
	q := contract.DeadLetterQueue(brokertest.Queue(b, conn, "console-bench"))
	if err := topology.New().Queue(q, topology.WithQueueType(topology.QueueClassic)).Apply(context.Background(), conn); err != nil {
		b.Fatal(err)
	}
	for i := range n {
		env := acemq.MustEnvelope(acemq.Fields{Type: "order.placed", Reason: fmt.Sprintf("the handler rejected it: QuantityError: order o-%d: the quantity must be positive", i)})
		if err := brokertest.Publish(context.Background(), conn, brokertest.Outbound{RoutingKey: q, Envelope: env, ContentType: "application/json", Body: []byte(`{"id":"o-1","qty":-1}`)}); err != nil {
			b.Fatal(err)
		}
	}
	back := func() {
		testenv.Eventually(b, "the messages back", func() bool { return brokertest.Depth(b, conn, q) == n })
	}
	back()

	b.Run("console", func(b *testing.B) {
		c := serve(b, conn, console.WithPeekLimit(n))
		for b.Loop() {
			var v view
			if st := c.do("GET", "/api/queues/"+q, "", &v); st != 200 || v.Peeked != n {
				b.Fatalf("%d: peeked %d", st, v.Peeked)
			}
			back()
		}
	})
	b.Run("raw-amqp091", func(b *testing.B) {
		rc, err := amqp.Dial(url)
		if err != nil {
			b.Fatal(err)
		}
		defer rc.Close()
		ch, err := rc.Channel()
		if err != nil {
			b.Fatal(err)
		}
		for b.Loop() {
			var last uint64
			got := 0
			for {
				d, ok, err := ch.Get(q, false)
				if err != nil {
					b.Fatal(err)
				}
				if !ok {
					break
				}
				last = d.DeliveryTag
				got++
			}
			if got != n {
				b.Fatalf("read %d", got)
			}
			if err := ch.Nack(last, true, true); err != nil {
				b.Fatal(err)
			}
			back()
		}
	})
}
