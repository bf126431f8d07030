package claimcheck_test

import (
	"context"
	"fmt"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/claimcheck"
	"github.com/acemq/acemq/topology"
)

type Report struct {
	Name string `json:"name"`
	Rows string `json:"rows"`
}

// A producer and a consumer share a claim-check codec wrapped around JSON:
// the large report goes to the store and only its key crosses the broker.
func Example() {
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://claimcheck-example")
	if err != nil {
		panic(err)
	}
	defer conn.Close(ctx)
	if err := topology.New().Queue("reports").Apply(ctx, conn); err != nil {
		panic(err)
	}

	store := claimcheck.NewMemoryStore() // claimcheck.NewDirStore(dir) for a shared volume
	codec := claimcheck.Must(acemq.JSON, store)

	got := make(chan acemq.Message[Report], 1)
	consumer, err := acemq.Consume(ctx, conn, "reports", func(_ context.Context, m acemq.Message[Report]) acemq.Ack {
		got <- m
		return acemq.Accept()
	}, acemq.WithCodec(codec))
	if err != nil {
		panic(err)
	}
	defer consumer.Close(ctx)

	pub := acemq.NewPublisher[Report](conn, "", acemq.WithCodec(codec))
	if _, err := pub.Send(ctx, "reports", Report{Name: "q3", Rows: strings.Repeat("x", 100_000)}); err != nil {
		panic(err)
	}
	m := <-got
	_, stored := claimcheck.KeyOf(m.Body)
	fmt.Println("body bytes on the wire:", len(m.Body))
	fmt.Println("stored:", stored, "payloads in the store:", store.Len())
	fmt.Println("decoded:", m.Payload.Name, len(m.Payload.Rows))
	fmt.Println("content type:", m.ContentType)
	// Output:
	// body bytes on the wire: 39
	// stored: true payloads in the store: 1
	// decoded: q3 100000
	// content type: application/json
}

// KeyOf reads the key of a dead-lettered claim-check body without fetching
// the payload, for triage.
func ExampleKeyOf() {
	body := append([]byte{0xAC, 0x01, 0x01}, "3f2c9a1e-0b7d-4c55-9e10-6a1f0d2b8c47"...)
	key, ok := claimcheck.KeyOf(body)
	fmt.Println(key, ok)
	_, ok = claimcheck.KeyOf(append([]byte{0xAC, 0x01, 0x00}, `{"id":"o-1"}`...))
	fmt.Println(ok)
	// Output:
	// 3f2c9a1e-0b7d-4c55-9e10-6a1f0d2b8c47 true
	// false
}
