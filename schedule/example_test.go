package schedule_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/schedule"
	"github.com/acemq/acemq/topology"
)

// A reminder scheduled two seconds ahead waits on the 1s rung, comes back
// through the control queue and is delivered with the id SendAfter
// returned.
func Example() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://schedule-example")
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("reminders", topology.WithQueueType(topology.QueueClassic)).Apply(ctx, conn); err != nil {
		log.Fatal(err)
	}

	// The control consumer: one per broker is enough, more are harmless.
	ctrl, err := schedule.Serve(ctx, conn)
	if err != nil {
		log.Fatal(err)
	}
	defer ctrl.Close(ctx)

	got := make(chan acemq.Message[string], 1)
	cons, err := acemq.Consume(ctx, conn, "reminders", func(_ context.Context, m acemq.Message[string]) acemq.Ack {
		got <- m
		return acemq.Accept()
	})
	if err != nil {
		log.Fatal(err)
	}
	defer cons.Close(ctx)

	p := schedule.NewPublisher[string](conn, "")
	env, err := p.SendAfter(ctx, "reminders", 2*time.Second, "pay the invoice")
	if err != nil {
		log.Fatal(err)
	}
	m := <-got
	fmt.Println(m.Payload, m.Envelope.ID() == env.ID(), m.Envelope.Attempt())
	// Output: pay the invoice true 1
}
