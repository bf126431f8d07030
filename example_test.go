package acemq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"log"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/topology"
)

func ExampleNewEnvelope() {
	env, err := acemq.NewEnvelope(acemq.Fields{
		Type:          "order.placed",
		Version:       2,
		CorrelationID: "checkout-7",
		Headers:       map[string]any{"tenant": "acme"},
	})
	if err != nil {
		log.Fatal(err)
	}
	tenant, _ := env.Header("tenant")
	fmt.Println(env.Type(), env.Version(), env.Attempt(), env.CorrelationID(), tenant)

	// Change returns a changed copy; env itself never changes.
	shipped, err := env.Change(func(f *acemq.Fields) {
		f.Type = "order.shipped"
		f.CausationID = env.ID()
	})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(env.Type(), shipped.Type(), shipped.CausationID() == env.ID())

	// Reserved names are refused, never dropped.
	_, err = acemq.NewEnvelope(acemq.Fields{Headers: map[string]any{"x-acemq-id": "mine", "tenant": "acme"}})
	fmt.Println(err)
	// Output:
	// order.placed 2 1 checkout-7 acme
	// order.placed order.shipped true
	// these header names belong to AceMQ and cannot be set by hand: x-acemq-id
}

func ExampleReadEnvelope() {
	// Headers as some producer wrote them: a string sent as bytes, the
	// attempt as a decimal string, a header from a newer library version.
	headers := map[string]any{
		"x-acemq-id":         "11111111-2222-3333-4444-555555555555",
		"x-acemq-type":       []byte("order.placed"),
		"x-acemq-attempt":    "2",
		"x-acemq-first-seen": int64(1767323045678),
		"x-acemq-new-thing":  "v9",
		"tenant":             "acme",
	}
	env := acemq.ReadEnvelope(headers, "orders.new", "11111111-2222-3333-4444-555555555555")
	fmt.Println(env.Type(), env.Attempt(), env.Version(), env.CorrelationID() == env.ID())
	fmt.Println(env.FirstSeen().Format(time.RFC3339Nano))
	fmt.Println(env.Headers()) // the unknown x-acemq-new-thing is not the application's…

	// …but a republish of the same message carries it, and known fields go
	// out in their canonical types.
	out := env.Next().AppendHeaders(nil, "orders.new")
	fmt.Printf("%v %T %v\n", out["x-acemq-new-thing"], out["x-acemq-attempt"], out["x-acemq-attempt"])

	// A message from a producer that knows nothing of AceMQ.
	foreign := acemq.ReadEnvelope(nil, "legacy.event", "msg-42")
	_, known := foreign.Age()
	fmt.Println(foreign.ID(), foreign.Type(), foreign.Attempt(), foreign.CorrelationID(), known)
	// Output:
	// order.placed 2 1 true
	// 2026-01-02T03:04:05.678Z
	// map[tenant:acme]
	// v9 int32 3
	// msg-42 legacy.event 1 msg-42 false
}

func ExampleEnvelope_AppendHeaders() {
	env := acemq.MustEnvelope(acemq.Fields{
		ID:        "11111111-2222-3333-4444-555555555555",
		FirstSeen: time.UnixMilli(1767323045678),
		Route:     []string{"validate", "ship"},
	})
	h := env.AppendHeaders(nil, "orders.new")
	for _, k := range []string{"x-acemq-type", "x-acemq-first-seen", "x-acemq-route", "x-acemq-route-position", "x-acemq-causation"} {
		v, ok := h[k]
		fmt.Printf("%s %T %v %v\n", k, v, v, ok)
	}
	// Output:
	// x-acemq-type string orders.new true
	// x-acemq-first-seen int64 1767323045678 true
	// x-acemq-route string validate,ship true
	// x-acemq-route-position int32 0 true
	// x-acemq-causation <nil> <nil> false
}

type exampleOrder struct {
	ID     string `json:"id"`
	Amount int    `json:"amount"`
}

func ExampleNewPublisher() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-publisher", acemq.WithOrigin("orders@example"))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	// The default exchange "" routes by queue name.
	if err := topology.New().Queue("orders.new").Apply(ctx, conn); err != nil {
		log.Fatal(err)
	}

	orders := acemq.NewPublisher[exampleOrder](conn, "")
	env, err := orders.Send(ctx, "orders.new", exampleOrder{ID: "o-1", Amount: 5})
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(env.Type() == "", env.Attempt(), env.Origin())

	// Mandatory by default: a message no queue takes is an error, not a loss.
	_, err = orders.Send(ctx, "orders.typo", exampleOrder{ID: "o-2"})
	var unroutable *driver.ReturnError
	fmt.Println(errors.As(err, &unroutable), unroutable.Code)

	// A batch: everything is published, then every confirm awaited.
	results, err := orders.SendAll(ctx, []acemq.Outgoing[exampleOrder]{
		{RoutingKey: "orders.new", Payload: exampleOrder{ID: "o-3"}},
		{RoutingKey: "orders.typo", Payload: exampleOrder{ID: "o-4"}},
	})
	fmt.Println(results[0].Err == nil, results[1].Err != nil)
	fmt.Println(err)
	// Output:
	// true 1 orders@example
	// true 312
	// true true
	// 1 of 2 messages were not confirmed; 1 were. The first failure was: the message was unroutable: 312 NO_ROUTE (exchange "", routing key "orders.typo")
}

// SendSeq publishes a run of messages from one goroutine without waiting
// for each confirm, and reports each message's outcome in order.
func ExamplePublisher_SendSeq() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-sendseq")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("orders.imported").Apply(ctx, conn); err != nil {
		log.Fatal(err)
	}

	// Any iter.Seq will do: rows of a table, lines of a file. Here, five orders.
	rows := func(yield func(acemq.Outgoing[exampleOrder]) bool) {
		for i := 1; i <= 5; i++ {
			o := exampleOrder{ID: fmt.Sprintf("o-%d", i), Amount: i * 10}
			if !yield(acemq.Outgoing[exampleOrder]{RoutingKey: "orders.imported", Payload: o}) {
				return // SendSeq stopped: its ctx ended
			}
		}
	}
	confirmed := 0
	err = acemq.NewPublisher[exampleOrder](conn, "").SendSeq(ctx, rows, func(r acemq.SendResult) {
		if r.Err != nil {
			log.Printf("message %s: %v", r.Envelope.ID(), r.Err)
			return
		}
		confirmed++
	})
	fmt.Println(confirmed, err)
	// Output: 5 <nil>
}

func ExamplePublisher_Send() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-send")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("shipping").Apply(ctx, conn); err != nil {
		log.Fatal(err)
	}

	// The envelope of an incoming message (in a handler, m.Envelope).
	incoming := acemq.ReadEnvelope(map[string]any{"x-acemq-id": "in-1", "x-acemq-correlation": "checkout-7"}, "orders.new", "in-1")

	// The event it causes: a new id, the same correlation, causation = its id.
	next, err := incoming.Derive().Change(func(f *acemq.Fields) {
		f.Type = "order.shipped"
		f.Origin = "shipping@example"
	})
	if err != nil {
		log.Fatal(err)
	}
	sent, err := acemq.NewPublisher[exampleOrder](conn, "").Send(ctx, "shipping", exampleOrder{ID: "o-1"}, acemq.WithEnvelope(next))
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(sent.Type(), sent.CorrelationID(), sent.CausationID(), sent.ID() != incoming.ID(), sent.Origin())
	// Output: order.shipped checkout-7 in-1 true shipping@example
}

func ExampleConsume() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example-consume")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("orders.new").Apply(ctx, conn); err != nil {
		log.Fatal(err)
	}

	done := make(chan struct{})
	consumer, err := acemq.Consume(ctx, conn, "orders.new", func(ctx context.Context, m acemq.Message[exampleOrder]) acemq.Ack {
		fmt.Println("got", m.Payload.ID, m.Payload.Amount, "type", m.Envelope.Type(), "attempt", m.Envelope.Attempt())
		close(done)
		return acemq.Accept()
	})
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close(ctx)

	env := acemq.MustEnvelope(acemq.Fields{Type: "order.placed"})
	if _, err := acemq.NewPublisher[exampleOrder](conn, "").Send(ctx, "orders.new", exampleOrder{ID: "o-1", Amount: 5}, acemq.WithEnvelope(env)); err != nil {
		log.Fatal(err)
	}
	<-done
	// Output: got o-1 5 type order.placed attempt 1
}

// The whole life of a message on the in-process broker: declare, consume,
// publish, settle.
func Example() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://example") // amqp://… with the rabbitmq driver imported
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)

	topo := topology.New().
		Exchange("shop", topology.ExchangeTopic).
		Queue("shop.orders", topology.WithDeadLettering(true)).
		Bind("shop", "shop.orders", "order.*")
	if err := topo.Apply(ctx, conn); err != nil {
		log.Fatal(err)
	}

	done := make(chan acemq.Settlement, 1)
	conn.OnSettle(func(s acemq.Settlement) { done <- s })
	consumer, err := acemq.Consume(ctx, conn, "shop.orders", func(ctx context.Context, m acemq.Message[exampleOrder]) acemq.Ack {
		fmt.Println("handling", m.Payload.ID, "type", m.Envelope.Type())
		return acemq.Accept()
	})
	if err != nil {
		log.Fatal(err)
	}
	defer consumer.Close(ctx)

	if _, err := acemq.NewPublisher[exampleOrder](conn, "shop").Send(ctx, "order.placed", exampleOrder{ID: "o-1"}); err != nil {
		log.Fatal(err)
	}
	fmt.Println("settled:", (<-done).Outcome)
	// Output:
	// handling o-1 type order.placed
	// settled: acked
}

func ExampleConnect() {
	ctx := context.Background()
	// memory://NAME is an in-process broker: every connection to the same
	// URL in this process shares it. For RabbitMQ, import
	// github.com/acemq/acemq/rabbitmq for its side effects and connect to
	// amqp://user:pass@host:5672/vhost (or amqps://).
	conn, err := acemq.Connect(ctx, "memory://example-connect",
		acemq.WithName("orders-service"),
		acemq.WithOrigin("orders@host-1"))
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	fmt.Println(conn, conn.Origin())

	// A mistake in the URL or the options is refused, saying what to do.
	_, err = acemq.Connect(ctx, "memory://example-connect", acemq.WithMaxOutstanding(0))
	fmt.Println(err)
	// Output:
	// acemq.Conn(orders-service memory://example-connect) orders@host-1
	// acemq: WithMaxOutstanding(0): at least one publish must be allowed to await its confirm; the default is 1000
}

func ExampleEnvelope_Change() {
	delivered := acemq.ReadEnvelope(map[string]any{"x-acemq-id": "m-1", "x-acemq-attempt": int32(3), "tenant": "acme"}, "orders.new", "m-1")
	again, err := delivered.Change(func(f *acemq.Fields) {
		f.Attempt = 1
		f.Headers["tenant"] = "globex"
	})
	if err != nil {
		log.Fatal(err)
	}
	t1, _ := delivered.Header("tenant")
	t2, _ := again.Header("tenant")
	fmt.Println(delivered.Attempt(), t1, "→", again.Attempt(), t2, again.ID())
	// Output: 3 acme → 1 globex m-1
}

func ExampleEnvelope_MarshalJSON() {
	env := acemq.MustEnvelope(acemq.Fields{
		ID:        "11111111-2222-3333-4444-555555555555",
		Type:      "order.placed",
		FirstSeen: time.UnixMilli(1767323045678),
		Headers:   map[string]any{"tenant": "acme", "raw": []byte{1, 2}},
	})
	b, err := json.Marshal(env)
	if err != nil {
		log.Fatal(err)
	}
	fmt.Println(string(b))
	// Output:
	// {"id":"11111111-2222-3333-4444-555555555555","type":"order.placed","version":1,"correlationId":"11111111-2222-3333-4444-555555555555","causationId":"","attempt":1,"firstSeen":1767323045678,"origin":"","error":"","claim":"","route":[],"routePosition":0,"routeId":"","headers":{"raw":{"$bytes":"AQI="},"tenant":"acme"}}
}
