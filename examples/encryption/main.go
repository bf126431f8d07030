// Encryption sends orders encrypted with AES-GCM and rotates the key
// without stopping anything (docs/encryption.md). First the consumer's
// keyring holds the old key 2025-12 and the new key 2026-01 while the
// producer still writes with 2025-12; then the producer moves to 2026-01,
// and the consumer reads both; last, a consumer whose ring dropped 2025-12
// too early parks a body written under it, with the key id in the reason,
// and an operator reads that id from the parked body without any key.
//
//	go run ./examples/encryption
//
// It runs on the in-process memory:// broker by default, and against
// RabbitMQ with -url or ACEMQ_URL; being a demo, it deletes what it declared
// when it is done. Real keys come from a file (encrypted.LoadKeyringFile),
// an environment variable or a KMS, never from the source.
package main

import (
	"bytes"
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec/encrypted"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/queues"
	_ "github.com/acemq/acemq/rabbitmq" // amqp:// and amqps://
	"github.com/acemq/acemq/topology"
)

// Order is the payload: JSON inside the encryption.
type Order struct {
	ID string `json:"id"`
}

const queue = "orders.encrypted"

func main() {
	err := run(context.Background(), os.Args[1:], os.Stdout)
	if err != nil && !errors.Is(err, flag.ErrHelp) {
		fmt.Fprintln(os.Stderr, "encryption:", err)
		os.Exit(1)
	}
}

func run(ctx context.Context, args []string, out io.Writer) (err error) {
	fs := flag.NewFlagSet("encryption", flag.ContinueOnError)
	url := fs.String("url", envOr("ACEMQ_URL", "memory://encryption"), "broker URL (or set ACEMQ_URL)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	conn, err := acemq.Connect(ctx, *url, acemq.WithName("encryption example"))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, conn.Close(context.Background())) }()
	topo := topology.New().Queue(queue, topology.WithQueueType(topology.QueueClassic), topology.WithDeadLettering(true))
	if err := topo.Apply(ctx, conn); err != nil {
		return err
	}
	defer func() { err = errors.Join(err, topo.Delete(context.Background(), conn)) }()

	oldKey, newKey := bytes.Repeat([]byte{1}, 32), bytes.Repeat([]byte{2}, 32)
	before, err := encrypted.NewKeyring("2025-12", map[string][]byte{"2025-12": oldKey})
	if err != nil {
		return err
	}
	both, err := encrypted.NewKeyring("2026-01", map[string][]byte{"2026-01": newKey, "2025-12": oldKey})
	if err != nil {
		return err
	}
	onlyNew, err := encrypted.NewKeyring("2026-01", map[string][]byte{"2026-01": newKey})
	if err != nil {
		return err
	}
	fmt.Fprintf(out, "consumer keyring: %v\n", both) // prints ids, never secrets

	got := make(chan acemq.Message[Order], 4)
	consume := func(ring *encrypted.Keyring) (*acemq.Consumer, error) {
		return acemq.Consume(ctx, conn, queue, func(_ context.Context, m acemq.Message[Order]) acemq.Ack {
			got <- m
			return acemq.Accept()
		}, acemq.WithCodec(encrypted.Must(acemq.JSON, ring)))
	}
	send := func(ring *encrypted.Keyring, id string) error {
		pub := acemq.NewPublisher[Order](conn, "", acemq.WithCodec(encrypted.Must(acemq.JSON, ring)))
		_, err := pub.Send(ctx, queue, Order{ID: id})
		return err
	}
	receive := func() error {
		select {
		case m := <-got:
			id, _ := encrypted.KeyIDOf(m.Body)
			fmt.Fprintf(out, "read %s (key id %s, %d-byte body, %s)\n", m.Payload.ID, id, len(m.Body), m.ContentType)
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}

	// 1 and 2: the consumer reads both keys while the producer moves.
	consumer, err := consume(both)
	if err != nil {
		return err
	}
	if err := send(before, "o-1"); err != nil {
		return err
	}
	if err := receive(); err != nil {
		return err
	}
	if err := send(both, "o-2"); err != nil {
		return err
	}
	if err := receive(); err != nil {
		return err
	}
	if err := consumer.Close(ctx); err != nil {
		return err
	}

	// 3: the old key dropped too early.
	consumer, err = consume(onlyNew)
	if err != nil {
		return err
	}
	if err := send(before, "o-3"); err != nil {
		return err
	}
	b, err := queues.Browse(ctx, conn, contract.ParkedQueue(queue))
	if err != nil {
		return err
	}
	defer func() { err = errors.Join(err, b.Close()) }()
	for {
		m, ok, err := b.Next(ctx)
		if err != nil {
			return err
		}
		if ok {
			id, _ := encrypted.KeyIDOf(m.Body)
			fmt.Fprintf(out, "parked, key id %s: %s\n", id, m.Envelope.Reason())
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(10 * time.Millisecond):
		}
	}
	return consumer.Close(ctx)
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}
