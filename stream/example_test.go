package stream_test

import (
	"context"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/stream"
	"github.com/acemq/acemq/topology"
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
	err = topology.New().Queue("orders.events",
		topology.WithQueueType(topology.QueueStream),
		topology.WithMaxAge(7*24*time.Hour),
		topology.WithMaxLengthBytes(1<<30)).Apply(ctx, conn)
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

// A reader's handler wrapped in middleware: here one that logs each message
// with its offset before the handler sees it, and turns a handler's panic
// into a Park instead of a dead letter.
func ExampleWithMiddleware() {
	ctx := context.Background()
	defer memory.Reset("memory://stream-middleware")
	conn, err := acemq.Connect(ctx, "memory://stream-middleware")
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("audit", topology.WithQueueType(topology.QueueStream)).Apply(ctx, conn); err != nil {
		panic(err)
	}
	pub := acemq.NewPublisher[string](conn, "")
	for _, e := range []string{"login", "oops", "logout"} {
		if _, err := pub.Send(ctx, "audit", e); err != nil {
			panic(err)
		}
	}
	logged := func(next acemq.Handler[string]) acemq.Handler[string] {
		return func(ctx context.Context, m acemq.Message[string]) (ack acemq.Ack) {
			fmt.Printf("offset %d: %s\n", m.Offset, m.Payload)
			defer func() {
				if v := recover(); v != nil {
					ack = acemq.Park(fmt.Errorf("recovered: %v", v))
				}
			}()
			return next(ctx, m)
		}
	}
	done := make(chan struct{})
	r, err := stream.Read(ctx, conn, "audit", func(_ context.Context, m acemq.Message[string]) acemq.Ack {
		if m.Payload == "oops" {
			panic("cannot audit this")
		}
		if m.Payload == "logout" {
			close(done)
		}
		return acemq.Accept()
	}, stream.WithOffset(stream.First()), stream.WithMiddleware(logged))
	if err != nil {
		panic(err)
	}
	<-done
	_ = r.Close(ctx)
	parked, _ := queues.Inspect(ctx, conn, contract.ParkedQueue("audit"))
	fmt.Println("parked:", parked.Messages)
	// Output:
	// offset 0: login
	// offset 1: oops
	// offset 2: logout
	// parked: 1
}
