package memory_test

import (
	"context"
	"fmt"
	"log"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/topology"
)

// A broker on a clock the caller moves: a message with a TTL of an hour
// expires, and is dead-lettered, when the clock passes the hour — at
// once, in real time. (In a test, acemqtest.NewClock does this and waits
// for the consumers as the clock moves.)
func ExampleFakeClock() {
	ctx := context.Background()
	const url = "memory://example-clock"
	defer memory.Reset(url)
	clock := memory.NewFakeClock(time.Date(2030, 1, 1, 9, 0, 0, 0, time.UTC))
	if err := memory.SetClock(url, clock); err != nil { // before the first connection
		log.Fatal(err)
	}
	conn, err := acemq.Connect(ctx, url)
	if err != nil {
		log.Fatal(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("offers", topology.WithDeadLettering(true)).Apply(ctx, conn); err != nil {
		log.Fatal(err)
	}
	if _, err := acemq.NewPublisher[string](conn, "").Send(ctx, "offers", "10% off", acemq.WithExpiration(time.Hour)); err != nil {
		log.Fatal(err)
	}
	held := func() {
		offers, _ := queues.Inspect(ctx, conn, "offers")
		dead, _ := queues.Inspect(ctx, conn, "offers.dlq")
		fmt.Printf("%s: %d offer, %d dead-lettered\n", clock.Now().Format("15:04:05.000"), offers.Messages, dead.Messages)
	}
	held()
	clock.Advance(time.Hour - time.Millisecond)
	held()
	clock.Advance(time.Millisecond)
	held()
	// Output:
	// 09:00:00.000: 1 offer, 0 dead-lettered
	// 09:59:59.999: 1 offer, 0 dead-lettered
	// 10:00:00.000: 0 offer, 1 dead-lettered
}
