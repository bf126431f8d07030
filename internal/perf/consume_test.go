package perf

import (
	"context"
	"encoding/json"
	"strconv"
	"testing"
	"time"

	"github.com/acemq/acemq"
	amqp "github.com/rabbitmq/amqp091-go"
)

// BenchmarkConsume compares consuming with manual acks from a quorum queue
// at prefetch 200, with 1 and with 8 handlers, b.N messages per run. The
// queue is filled first (not timed) through acemq, so both sides read the
// same bytes: a 256-byte JSON body with a full envelope.
//
// raw (RawConsumer) consumes on one amqp091 channel with Qos 200; c1
// handles the deliveries in one goroutine, c8 in eight reading the same
// delivery channel; every delivery is decoded with encoding/json into an
// Order and acked singly. acemq runs Consume[Order] with WithConcurrency(1
// or 8), WithPrefetch(200) and WithDeclarations(false) (nothing to declare:
// the per-message path is the same); its handler returns Accept.
//
// rawenv (c1 and c8, for reference) is raw also reading the envelope by
// hand from every delivery's headers (EnvelopeFields: one lookup and type
// assertion per field), the least a consumer of the contract does with
// them: what is left between it and acemq is the library's own work, its
// lenient read, the copy of the application headers and its settlement.
//
// c1at5k and c8at5k are the same held to 5,000 messages a second: on both
// sides each delivery waits for its turn on one shared pacer before it is
// handled, so client CPU per message is compared at the same pace.
func BenchmarkConsume(b *testing.B) {
	url := brokerURL(b)
	for _, conc := range []int{1, 8} {
		name := "c" + strconv.Itoa(conc)
		b.Run(name, func(b *testing.B) {
			compare(b,
				side{"raw", func(b *testing.B) { rawConsume(b, url, conc, 0) }},
				side{"rawenv", func(b *testing.B) { rawConsumeAs(b, url, conc, 0, true) }},
				side{"acemq", func(b *testing.B) { acemqConsume(b, url, conc, 0) }})
		})
		b.Run(name+"at5k", func(b *testing.B) {
			compare(b,
				side{"raw", func(b *testing.B) { rawConsume(b, url, conc, pacedRate) }},
				side{"acemq", func(b *testing.B) { acemqConsume(b, url, conc, pacedRate) }})
		})
	}
}

// stallTimeout bounds a consume run that stopped making progress.
const stallTimeout = 5 * time.Minute

func filledQueue(b *testing.B, url string) string {
	b.StopTimer()
	q := declare(b, url, quorum)
	fill(b, url, q, b.N)
	return q
}

// rawConsume reads b.N messages, held to rate a second (0: as fast as it
// goes).
func rawConsume(b *testing.B, url string, conc, rate int) { rawConsumeAs(b, url, conc, rate, false) }

// rawConsumeAs is rawConsume, also reading each delivery's envelope by hand
// (EnvelopeFields) with readEnvelope.
func rawConsumeAs(b *testing.B, url string, conc, rate int, readEnvelope bool) {
	q := filledQueue(b, url)
	ac := dialRaw(b, url)
	done := NewCountdown(b.N)
	b.ReportAllocs()
	b.StartTimer()
	m := startMeter()
	pace := &sharedPacer{pacer: newPacer(rate)}
	c, err := StartRawConsumer(ac, RawConsumerConfig{
		Queue: q, Prefetch: prefetch, Handlers: conc, Done: done,
		Handle: func(d amqp.Delivery) {
			pace.next()
			if readEnvelope {
				var env EnvelopeFields
				env.Read(d.Headers)
				if env.ID == "" || env.Attempt != 1 {
					b.Errorf("the hand-written read found id %q, attempt %d", env.ID, env.Attempt)
				}
			}
			var o Order
			if err := json.Unmarshal(d.Body, &o); err != nil {
				b.Error(err)
			}
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	select {
	case <-done.Done():
	case <-c.Stopped():
		b.Fatalf("the deliveries stopped after %d of %d messages (was the connection closed?)", b.N-done.Left(), b.N)
	case <-time.After(stallTimeout):
		b.Fatalf("only %d of %d messages arrived within %s", b.N-done.Left(), b.N, stallTimeout)
	}
	m.Stop(b, b.N)
	if err := c.Err(); err != nil {
		b.Error(err)
	}
	_ = c.Close()
}

// acemqConsume reads b.N messages, held to rate a second (0: as fast as it
// goes).
func acemqConsume(b *testing.B, url string, conc, rate int) {
	q := filledQueue(b, url)
	c := connect(b, url)
	done := NewCountdown(b.N)
	b.ReportAllocs()
	b.StartTimer()
	m := startMeter()
	pace := &sharedPacer{pacer: newPacer(rate)}
	cons, err := acemq.Consume(ctxFor(b, time.Minute), c, q, func(_ context.Context, msg acemq.Message[Order]) acemq.Ack {
		pace.next()
		done.Tick()
		return acemq.Accept()
	}, acemq.WithConcurrency(conc), acemq.WithPrefetch(prefetch), acemq.WithDeclarations(false))
	if err != nil {
		b.Fatal(err)
	}
	select {
	case <-done.Done():
	case <-time.After(stallTimeout):
		_ = cons.Close(context.Background())
		b.Fatalf("only %d of %d messages arrived within %s", b.N-done.Left(), b.N, stallTimeout)
	}
	m.Stop(b, b.N)
	if err := cons.Close(ctxFor(b, time.Minute)); err != nil {
		b.Error(err)
	}
}
