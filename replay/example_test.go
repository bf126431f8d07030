package replay_test

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/replay"
	"github.com/acemq/acemq/topology"
)

// A handler rejects orders while a dependency is down; once it is back, the
// dead letters are replayed into the queue and handled.
func ExampleRun() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://replay-example")
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("orders.new").Apply(ctx, conn); err != nil {
		panic(err)
	}

	var up atomic.Bool
	handled := make(chan acemq.Message[string], 3)
	consumer, err := acemq.Consume(ctx, conn, "orders.new", func(_ context.Context, m acemq.Message[string]) acemq.Ack {
		if !up.Load() {
			return acemq.Reject(errors.New("the payment service is down"))
		}
		handled <- m
		return acemq.Accept()
	})
	if err != nil {
		panic(err)
	}
	defer consumer.Close(ctx)

	pub := acemq.NewPublisher[string](conn, "")
	for _, id := range []string{"o-1", "o-2", "o-3"} {
		if _, err := pub.Send(ctx, "orders.new", id); err != nil {
			panic(err)
		}
	}
	for { // wait until all three are dead-lettered
		info, _ := queues.Inspect(ctx, conn, "orders.new.dlq")
		if info.Messages == 3 {
			break
		}
		time.Sleep(time.Millisecond)
	}

	up.Store(true)
	res, err := replay.Run(ctx, conn, contract.DeadLetterQueue("orders.new"))
	if err != nil {
		panic(err)
	}
	fmt.Println(res.Moved, "moved:", res.Reason)
	for range 3 {
		m := <-handled
		count, _ := m.Envelope.Header(wire.HeaderReplayCount)
		from, _ := m.Envelope.Header(wire.HeaderReplayedFrom)
		fmt.Println(m.Payload, "attempt", m.Envelope.Attempt(), "replayed from", from, "count", count)
	}
	// Output:
	// 3 moved: drained
	// o-1 attempt 1 replayed from orders.new.dlq count 1
	// o-2 attempt 1 replayed from orders.new.dlq count 1
	// o-3 attempt 1 replayed from orders.new.dlq count 1
}
