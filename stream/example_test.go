package stream_test

import (
	"context"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/stream"
)

// A stream declared with retention, read from its first message, then read
// again from a checkpoint: the second reader starts where the first one
// stopped.
func ExampleRead() {
	ctx := context.Background()
	defer memory.Reset("memory://stream-example")
	conn, err := acemq.Connect(ctx, "memory://stream-example")
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	err = acemq.NewTopology().Queue("orders.events",
		acemq.WithQueueType(acemq.QueueStream),
		acemq.WithMaxAge(7*24*time.Hour),
		acemq.WithMaxLengthBytes(1<<30)).Apply(ctx, conn)
	if err != nil {
		panic(err)
	}
	pub := acemq.NewPublisher[string](conn, "")
	send := func(events ...string) {
		for _, e := range events {
			if _, err := pub.Send(ctx, "orders.events", e); err != nil {
				panic(err)
			}
		}
	}
	store := &stream.Memory{}
	readAll := func(n int) {
		done := make(chan struct{})
		seen := 0
		r, err := stream.Read(ctx, conn, "orders.events", func(_ context.Context, m acemq.Message[string]) acemq.Ack {
			fmt.Printf("offset %d: %s\n", m.Offset, m.Payload)
			if seen++; seen == n {
				close(done)
			}
			return acemq.Accept()
		}, stream.WithOffset(stream.First()), stream.WithCheckpoints(store, "example@orders.events"))
		if err != nil {
			panic(err)
		}
		<-done
		_ = r.Close(ctx) // saves the checkpoint
	}
	send("placed", "paid")
	readAll(2)
	send("shipped")
	readAll(1)
	// Output:
	// offset 0: placed
	// offset 1: paid
	// offset 2: shipped
}

func ExampleParseOffset() {
	for _, s := range []string{"first", "next", "42", "2026-01-02T15:04:05Z"} {
		o, err := stream.ParseOffset(s)
		fmt.Println(o, err)
	}
	// Output:
	// first <nil>
	// next <nil>
	// 42 <nil>
	// 2026-01-02T15:04:05Z <nil>
}
