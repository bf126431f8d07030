package peers

import (
	"context"
	"encoding/json"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/ThreeDotsLabs/watermill"
	wamqp "github.com/ThreeDotsLabs/watermill-amqp/v3/pkg/amqp"
	"github.com/ThreeDotsLabs/watermill/message"
	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/perf"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/internal/wire"
	_ "github.com/acemq/acemq/rabbitmq"
	amqp "github.com/rabbitmq/amqp091-go"
)

// BenchmarkPeers measures every side doing the same work in the same run,
// b.N messages per side:
//
//   - batch: one goroutine publishing as fast as it can with every
//     publish confirmed. raw and rawhdr keep a sliding window of 1,000
//     unconfirmed publishes (RawPublisher.Window); acemq calls SendAll with
//     batches of 1,000; watermill calls Publish with 1,000 messages at a
//     time (it publishes them one by one, waiting for each confirm: it has
//     no window).
//   - send1: one goroutine, one message at a time, each waiting for its
//     confirm (raw and rawhdr RawPublisher.Send, acemq Send, watermill
//     Publish of one message).
//   - send16: the same from 16 goroutines at once, sharing one connection
//     (raw and rawhdr share one confirm-mode channel; watermill has a pool
//     of 16 channels, one per goroutine).
//   - c1, c8: consuming a quorum queue filled beforehand through acemq (so
//     every side reads the same bytes), decoding each body with
//     encoding/json and acknowledging it singly, at prefetch 200. raw is
//     RawConsumer with 1 or 8 goroutines on one channel; acemq Consume
//     with WithConcurrency(1 or 8); watermill takes one message at a time
//     per subscription (it waits for the handler's Ack before it reads the
//     next), so c8 is 8 subscriptions, each a channel with prefetch 200.
//     Watermill's marshaller reads only string headers and so cannot read
//     acemq's messages (the contract's version and attempt are integers):
//     its queue is filled through Watermill, with the same body and the
//     same header names, every value a string.
//
// Every publishing side sends persistent, mandatory messages; rawhdr,
// acemq and watermill carry the contract's headers (watermill as its
// message metadata, which its marshaller writes as string headers, with
// its message UUID as x-acemq-id).
func BenchmarkPeers(b *testing.B) {
	url := testenv.AMQPURL(b)
	b.Run("batch", func(b *testing.B) {
		perf.Compare(b,
			perf.Side{Name: "raw", Run: func(b *testing.B) { rawWindow(b, url, false) }},
			perf.Side{Name: "rawhdr", Run: func(b *testing.B) { rawWindow(b, url, true) }},
			perf.Side{Name: "acemq", Run: func(b *testing.B) { acemqSendAll(b, url) }},
			perf.Side{Name: "watermill", Run: func(b *testing.B) { watermillBatch(b, url) }})
	})
	for _, n := range []int{1, perf.Senders} {
		b.Run(fmt.Sprintf("send%d", n), func(b *testing.B) {
			perf.Compare(b,
				perf.Side{Name: "raw", Run: func(b *testing.B) { rawSend(b, url, n, false) }},
				perf.Side{Name: "rawhdr", Run: func(b *testing.B) { rawSend(b, url, n, true) }},
				perf.Side{Name: "acemq", Run: func(b *testing.B) { acemqSend(b, url, n) }},
				perf.Side{Name: "watermill", Run: func(b *testing.B) { watermillSend(b, url, n) }})
		})
	}
	for _, n := range []int{1, 8} {
		b.Run(fmt.Sprintf("c%d", n), func(b *testing.B) {
			perf.Compare(b,
				perf.Side{Name: "raw", Run: func(b *testing.B) { rawConsume(b, url, n) }},
				perf.Side{Name: "acemq", Run: func(b *testing.B) { acemqConsume(b, url, n) }},
				perf.Side{Name: "watermill", Run: func(b *testing.B) { watermillConsume(b, url, n) }})
		})
	}
}

// body is the benchmark payload encoded per message, as every side does.
func body() []byte {
	bs, err := json.Marshal(order)
	if err != nil {
		panic(err)
	}
	return bs
}

var order = perf.NewOrder()

func rawMessage(seq uint64, headers bool) amqp.Publishing {
	var env *perf.EnvelopeTable
	if headers {
		env = perf.FullTable
	}
	return perf.RawMessage(seq, "", "application/json", body(), env)
}

// rawPublisher declares a quorum queue and opens a RawPublisher on a raw
// connection of its own, closed at cleanup.
func rawPublisher(b *testing.B, url string) (string, *perf.RawPublisher) {
	q := perf.Declare(b, url, perf.Quorum)
	p, err := perf.NewRawPublisher(perf.OpenRaw(b, url))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return q, p
}

func rawWindow(b *testing.B, url string, headers bool) {
	q, p := rawPublisher(b, url)
	ctx := perf.CtxFor(b, 10*time.Minute)
	b.ReportAllocs()
	b.ResetTimer()
	m := perf.StartMeter()
	if err := p.Window(ctx, "", q, b.N, perf.Window, false, func(i int) amqp.Publishing { return rawMessage(uint64(i), headers) }, nil); err != nil {
		b.Fatal(err)
	}
	m.Stop(b, b.N)
}

// parallel runs b.N calls of send from n goroutines and reports them.
func parallel(b *testing.B, n int, send func(i int64) error) {
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	m := perf.StartMeter()
	for range n {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if err := send(i); err != nil {
					b.Errorf("no confirm: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	m.Stop(b, b.N)
}

func rawSend(b *testing.B, url string, n int, headers bool) {
	q, p := rawPublisher(b, url)
	ctx := perf.CtxFor(b, 10*time.Minute)
	parallel(b, n, func(i int64) error { return p.Send(ctx, "", q, rawMessage(uint64(i), headers)) })
}

func acemqSendAll(b *testing.B, url string) {
	q := perf.Declare(b, url, perf.Quorum)
	p := acemq.NewPublisher[perf.Order](perf.Connect(b, url, acemq.WithMaxOutstanding(perf.Window)), "")
	ctx := perf.CtxFor(b, 10*time.Minute)
	batch := make([]acemq.Outgoing[perf.Order], 0, perf.Window)
	b.ReportAllocs()
	b.ResetTimer()
	m := perf.StartMeter()
	for sent := 0; sent < b.N; {
		batch = batch[:0]
		for i := 0; i < perf.Window && sent+i < b.N; i++ {
			batch = append(batch, acemq.Outgoing[perf.Order]{RoutingKey: q, Payload: order, Envelope: perf.NewFullEnvelope()})
		}
		if _, err := p.SendAll(ctx, batch); err != nil {
			b.Fatal(err)
		}
		sent += len(batch)
	}
	m.Stop(b, b.N)
}

func acemqSend(b *testing.B, url string, n int) {
	q := perf.Declare(b, url, perf.Quorum)
	p := acemq.NewPublisher[perf.Order](perf.Connect(b, url, acemq.WithMaxOutstanding(perf.Window)), "")
	ctx := perf.CtxFor(b, 10*time.Minute)
	parallel(b, n, func(int64) error {
		_, err := p.Send(ctx, q, order, acemq.WithEnvelope(perf.NewFullEnvelope()))
		return err
	})
}

// watermillConfig is watermill-amqp's configuration for a durable queue
// (NewDurableQueueConfig: durable queue named after the topic, the default
// exchange, persistent messages), with what its documentation gives for
// guaranteed delivery: ConfirmDelivery (Publish waits for the broker's
// confirm) and a pool of channels (ChannelPoolSize, one per publishing
// goroutine, rather than a channel opened and closed per Publish), and,
// for the same work as the other sides, mandatory publishes, a quorum
// queue, prefetch 200, and the message UUID in x-acemq-id.
func watermillConfig(url string, channels int) wamqp.Config {
	c := wamqp.NewDurableQueueConfig(url)
	c.Connection.AmqpConfig = &amqp.Config{Properties: amqp.Table{"connection_name": "acemq-perf watermill"}}
	c.Queue.Arguments = amqp.Table{"x-queue-type": string(perf.Quorum)}
	c.Publish.ConfirmDelivery = true
	c.Publish.ChannelPoolSize = channels
	c.Publish.Mandatory = true
	c.Consume.Qos.PrefetchCount = perf.Prefetch
	c.Marshaler = wamqp.DefaultMarshaler{MessageUUIDHeaderKey: wire.HeaderID}
	return c
}

// watermillMessage is the benchmark message as Watermill carries it: a
// UUID, the JSON body, and the contract's other headers as metadata.
func watermillMessage() *message.Message {
	id := watermill.NewUUID()
	msg := message.NewMessage(id, body())
	for k, v := range perf.FullTable.For(id, "") {
		if k != wire.HeaderID {
			msg.Metadata.Set(k, fmt.Sprint(v))
		}
	}
	return msg
}

func watermillPublisher(b *testing.B, url string, channels int) *wamqp.Publisher {
	p, err := wamqp.NewPublisher(watermillConfig(url, channels), watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
}

func watermillBatch(b *testing.B, url string) {
	q := perf.Declare(b, url, perf.Quorum)
	p := watermillPublisher(b, url, 1)
	batch := make([]*message.Message, 0, perf.Window)
	b.ReportAllocs()
	b.ResetTimer()
	m := perf.StartMeter()
	for sent := 0; sent < b.N; {
		batch = batch[:0]
		for i := 0; i < perf.Window && sent+i < b.N; i++ {
			batch = append(batch, watermillMessage())
		}
		if err := p.Publish(q, batch...); err != nil {
			b.Fatal(err)
		}
		sent += len(batch)
	}
	m.Stop(b, b.N)
}

func watermillSend(b *testing.B, url string, n int) {
	q := perf.Declare(b, url, perf.Quorum)
	p := watermillPublisher(b, url, n)
	parallel(b, n, func(int64) error { return p.Publish(q, watermillMessage()) })
}

// filled declares a quorum queue and fills it with b.N messages through
// acemq, outside the timer.
func filled(b *testing.B, url string) string {
	b.StopTimer()
	q := perf.Declare(b, url, perf.Quorum)
	perf.Fill(b, url, q, b.N)
	return q
}

// stall bounds a consume run that stopped making progress.
const stall = time.Minute

// await waits for done, failing b when deliveries stop.
func await(b *testing.B, done *perf.Countdown) {
	if !done.Wait(perf.CtxFor(b, 10*time.Minute), stall) {
		b.Fatalf("only %d of %d messages arrived", b.N-done.Left(), b.N)
	}
}

func decode(b *testing.B, bs []byte) {
	var o perf.Order
	if err := json.Unmarshal(bs, &o); err != nil {
		b.Error(err)
	}
}

func rawConsume(b *testing.B, url string, n int) {
	q := filled(b, url)
	conn := perf.OpenRaw(b, url)
	done := perf.NewCountdown(b.N)
	b.ReportAllocs()
	b.StartTimer()
	m := perf.StartMeter()
	c, err := perf.StartRawConsumer(conn, perf.RawConsumerConfig{
		Queue: q, Prefetch: perf.Prefetch, Handlers: n, Done: done,
		Handle: func(d amqp.Delivery) { decode(b, d.Body) },
	})
	if err != nil {
		b.Fatal(err)
	}
	await(b, done)
	m.Stop(b, b.N)
	_ = c.Close()
}

func acemqConsume(b *testing.B, url string, n int) {
	q := filled(b, url)
	conn := perf.Connect(b, url)
	done := perf.NewCountdown(b.N)
	b.ReportAllocs()
	b.StartTimer()
	m := perf.StartMeter()
	c, err := acemq.Consume(perf.CtxFor(b, 10*time.Minute), conn, q, func(context.Context, acemq.Message[perf.Order]) acemq.Ack {
		done.Tick()
		return acemq.Accept()
	}, acemq.WithConcurrency(n), acemq.WithPrefetch(perf.Prefetch), acemq.WithDeclarations(false))
	if err != nil {
		b.Fatal(err)
	}
	await(b, done)
	m.Stop(b, b.N)
	_ = c.Close(context.Background())
}

func watermillConsume(b *testing.B, url string, n int) {
	b.StopTimer()
	q := perf.Declare(b, url, perf.Quorum)
	fillWatermill(b, url, q, b.N)
	sub, err := wamqp.NewSubscriber(watermillConfig(url, 0), watermill.NopLogger{})
	if err != nil {
		b.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := perf.NewCountdown(b.N)
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.StartTimer()
	m := perf.StartMeter()
	for range n {
		msgs, err := sub.Subscribe(ctx, q)
		if err != nil {
			b.Fatal(err)
		}
		wg.Go(func() {
			for msg := range msgs {
				decode(b, msg.Payload)
				msg.Ack()
				done.Tick()
			}
		})
	}
	await(b, done)
	m.Stop(b, b.N)
	cancel()
	_ = sub.Close()
	wg.Wait()
}

// fillWatermill puts n benchmark messages on queue through Watermill, in
// the format its subscriber reads.
func fillWatermill(b *testing.B, url, queue string, n int) {
	p := watermillPublisher(b, url, perf.Senders)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range perf.Senders {
		wg.Go(func() {
			for next.Add(1) <= int64(n) {
				if err := p.Publish(queue, watermillMessage()); err != nil {
					b.Errorf("filling %s: %v", queue, err)
					return
				}
			}
		})
	}
	wg.Wait()
}
