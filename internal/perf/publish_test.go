package perf

import (
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	amqp "github.com/rabbitmq/amqp091-go"
)

// BenchmarkPublish compares confirmed publishes of 256-byte JSON payloads
// into a quorum queue, b.N messages per run.
//
//   - batch: one goroutine. raw keeps a sliding window of 1,000
//     unconfirmed publishes on one confirm-mode channel (the best one
//     goroutine can do with amqp091); acemq calls Publisher.SendAll with
//     batches of 1,000, each carrying full envelopes.
//   - seq: one goroutine, raw's sliding window again; acemq calls
//     Publisher.SendSeq once over every message, which slides the same
//     window, with no batch boundary.
//   - seq5k: seq at 5,000 messages a second on both sides, for client
//     CPU per message at the same pace.
//   - send16: 16 goroutines. raw shares one confirm-mode channel and each
//     goroutine publishes with PublishWithDeferredConfirm and waits;
//     acemq calls Publisher.Send.
//
// Both sides encode the payload with encoding/json per message, publish
// persistent and mandatory with a message-id and a content type. Two more
// sides split the difference between raw and acemq into its parts:
//
//   - rawhdr is raw writing the headers a full envelope writes: the cost of
//     the envelope's bytes in amqp091 and in the broker;
//   - rawhdrbatch (batch only) is rawhdr waiting for every confirm of each
//     1,000 before sending the next 1,000, as PublishBatch and SendAll do:
//     the cost of the batch boundary;
//   - driver publishes the same headers through the rabbitmq driver
//     (brokertest.Driver(conn): PublishBatch of 1,000 for batch, Publish for
//     send16): the cost of the driver's confirm tracking and, for batch,
//     of waiting for every confirm of a batch before sending the next.
//
// What acemq adds on top of driver is the envelope, the codec and the
// telemetry hooks. The raw sides are RawPublisher (Window for batch, Send
// for send16), which `acemq bench --compare-raw` measures against too.
func BenchmarkPublish(b *testing.B) {
	url := brokerURL(b)
	b.Run("batch", func(b *testing.B) {
		compare(b,
			side{"raw", func(b *testing.B) { rawPublishWindow(b, url, false, false) }},
			side{"rawhdr", func(b *testing.B) { rawPublishWindow(b, url, true, false) }},
			side{"rawhdrbatch", func(b *testing.B) { rawPublishWindow(b, url, true, true) }},
			side{"driver", func(b *testing.B) { driverPublishBatch(b, url) }},
			side{"acemq", func(b *testing.B) { acemqSendAll(b, url) }})
	})
	// batch10k: the same against SendAll of 10,000 messages at a time,
	// still with at most 1,000 unconfirmed (WithMaxOutstanding): the window
	// slides inside one call, and the batch boundary, where SendAll waits
	// for the last confirm before the caller can encode the next batch, is
	// paid a tenth as often. For reference: what closes the batch row's
	// gap from the caller's side.
	b.Run("batch10k", func(b *testing.B) {
		compare(b,
			side{"rawhdr", func(b *testing.B) { rawPublishWindow(b, url, true, false) }},
			side{"acemq", func(b *testing.B) { acemqSendAllOf(b, url, 10*window) }})
	})
	// seq: one goroutine, the same work as raw's sliding window: acemq calls
	// Publisher.SendSeq once over all b.N messages, with at most window of
	// them unconfirmed, so there is no batch boundary.
	b.Run("seq", func(b *testing.B) {
		compare(b,
			side{"raw", func(b *testing.B) { rawPublishWindow(b, url, false, false) }},
			side{"rawhdr", func(b *testing.B) { rawPublishWindow(b, url, true, false) }},
			side{"acemq", func(b *testing.B) { acemqSendSeq(b, url) }})
	})
	// seq5k: seq held to 5,000 messages a second on both sides (a pace
	// both reach), for client CPU per message. Unpaced, a client's CPU per
	// message falls as its throughput rises (more confirms per basic.ack
	// frame, fewer wake-ups), so a side that runs slower also looks
	// costlier; at the same pace the two do the same work per message.
	b.Run("seq5k", func(b *testing.B) {
		compare(b,
			side{"rawhdr", func(b *testing.B) { rawPublishWindowPaced(b, url, true, false, pacedRate) }},
			side{"acemq", func(b *testing.B) { acemqSendSeqPaced(b, url, pacedRate) }})
	})
	b.Run("send16", func(b *testing.B) {
		compare(b,
			side{"raw", func(b *testing.B) { rawPublishConcurrent(b, url, false, 0) }},
			side{"rawhdr", func(b *testing.B) { rawPublishConcurrent(b, url, true, 0) }},
			side{"driver", func(b *testing.B) { driverPublishConcurrent(b, url) }},
			side{"acemq", func(b *testing.B) { acemqSend(b, url, 0) }})
	})
	// send16at5k: send16 with the 16 goroutines together held to 5,000
	// messages a second, for client CPU per message at the same pace.
	b.Run("send16at5k", func(b *testing.B) {
		compare(b,
			side{"rawhdr", func(b *testing.B) { rawPublishConcurrent(b, url, true, pacedRate) }},
			side{"acemq", func(b *testing.B) { acemqSend(b, url, pacedRate) }})
	})
}

// rawPublishing is message seq of the raw sides: the Order encoded with
// encoding/json, persistent, with a message-id and a content type; with
// headers, the headers a full envelope writes and, as the contract and
// acemq have them, a UUID for its id.
func rawPublishing(seq uint64, headers bool) amqp.Publishing {
	body, err := json.Marshal(NewOrderCached())
	if err != nil {
		panic(err)
	}
	var env *EnvelopeTable
	if headers {
		env = fullTable
	}
	return RawMessage(seq, "", "application/json", body, env)
}

var cachedOrder = NewOrder()

// NewOrderCached returns the benchmark payload without rebuilding it.
func NewOrderCached() Order { return cachedOrder }

// rawPublisher opens a RawPublisher on a raw connection of its own,
// closed at cleanup.
func rawPublisher(b *testing.B, url string) *RawPublisher {
	b.Helper()
	p, err := NewRawPublisher(dialRaw(b, url))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = p.Close() })
	return p
}

// pacedRate is the messages per second of the paced rows.
const pacedRate = 5000

// pacer holds a loop, or several goroutines sharing a count, to rate
// messages a second: before message i it sleeps until i/rate after the
// start, in steps of a millisecond or more so that the sleeps themselves
// cost little. A rate of 0 does not hold it. Both sides of a paced row
// wait on the same kind of pacer at the same points, so the pacing costs
// them the same.
type pacer struct {
	start time.Time
	rate  float64
}

func newPacer(rate int) pacer { return pacer{start: time.Now(), rate: float64(rate)} }

func (p pacer) wait(i int) {
	if p.rate <= 0 {
		return
	}
	if d := time.Until(p.start.Add(time.Duration(float64(i) / p.rate * float64(time.Second)))); d >= time.Millisecond {
		time.Sleep(d)
	}
}

// sharedPacer is a pacer and the count of the messages it has let through,
// for goroutines that take turns on it without a count of their own (a
// consumer's handlers, a stream reader's).
type sharedPacer struct {
	pacer
	n atomic.Int64
}

// next waits for the next message's turn.
func (p *sharedPacer) next() { p.wait(int(p.n.Add(1))) }

// rawPublishWindow publishes b.N messages keeping up to window of them
// unconfirmed (RawPublisher.Window). batched waits instead for every
// confirm of each window before sending the next one, as PublishBatch and
// SendAll do.
func rawPublishWindow(b *testing.B, url string, headers, batched bool) {
	rawPublishWindowPaced(b, url, headers, batched, 0)
}

// rawPublishWindowPaced is rawPublishWindow held to rate messages a second
// (0: as fast as it goes).
func rawPublishWindowPaced(b *testing.B, url string, headers, batched bool, rate int) {
	q := declare(b, url, quorum)
	p := rawPublisher(b, url)
	ctx := ctxFor(b, 10*time.Minute)
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeter()
	pace := newPacer(rate)
	err := p.Window(ctx, "", q, b.N, window, batched, func(i int) amqp.Publishing {
		pace.wait(i)
		return rawPublishing(uint64(i), headers)
	}, nil)
	if err != nil {
		b.Fatal(err)
	}
	m.Stop(b, b.N)
}

// rawPublishConcurrent publishes b.N messages from senders goroutines,
// each waiting for its confirm, held to rate messages a second (0: as fast
// as they go).
func rawPublishConcurrent(b *testing.B, url string, headers bool, rate int) {
	q := declare(b, url, quorum)
	p := rawPublisher(b, url)
	ctx := ctxFor(b, 10*time.Minute)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeter()
	pace := newPacer(rate)
	for range senders {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				pace.wait(int(i))
				if err := p.Send(ctx, "", q, rawPublishing(uint64(i), headers)); err != nil {
					b.Errorf("no confirm: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	m.Stop(b, b.N)
}

func acemqSendAll(b *testing.B, url string) { acemqSendAllOf(b, url, window) }

// acemqSendAllOf publishes b.N messages in SendAll batches of size, with
// at most window of them unconfirmed.
func acemqSendAllOf(b *testing.B, url string, size int) {
	q := declare(b, url, quorum)
	c := connect(b, url, acemq.WithMaxOutstanding(window))
	p := acemq.NewPublisher[Order](c, "")
	ctx := ctxFor(b, 10*time.Minute)
	batch := make([]acemq.Outgoing[Order], 0, size)
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeter()
	for sent := 0; sent < b.N; {
		batch = batch[:0]
		for i := 0; i < size && sent+i < b.N; i++ {
			batch = append(batch, acemq.Outgoing[Order]{RoutingKey: q, Payload: NewOrderCached(), Envelope: newFullEnvelope()})
		}
		if _, err := p.SendAll(ctx, batch); err != nil {
			b.Fatal(err)
		}
		sent += len(batch)
	}
	m.Stop(b, b.N)
}

// acemqSendSeq publishes b.N messages with one SendSeq, at most window of
// them unconfirmed.
func acemqSendSeq(b *testing.B, url string) { acemqSendSeqPaced(b, url, 0) }

// acemqSendSeqPaced is acemqSendSeq held to rate messages a second (0: as
// fast as it goes).
func acemqSendSeqPaced(b *testing.B, url string, rate int) {
	q := declare(b, url, quorum)
	c := connect(b, url, acemq.WithMaxOutstanding(window))
	p := acemq.NewPublisher[Order](c, "")
	ctx := ctxFor(b, 10*time.Minute)
	var pace pacer
	msgs := func(yield func(acemq.Outgoing[Order]) bool) {
		for i := range b.N {
			pace.wait(i)
			if !yield(acemq.Outgoing[Order]{RoutingKey: q, Payload: NewOrderCached(), Envelope: newFullEnvelope()}) {
				return
			}
		}
	}
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeter()
	pace = newPacer(rate)
	if err := p.SendSeq(ctx, msgs, nil); err != nil {
		b.Fatal(err)
	}
	m.Stop(b, b.N)
}

// acemqSend publishes b.N messages with Send from senders goroutines, held
// to rate messages a second (0: as fast as they go).
func acemqSend(b *testing.B, url string, rate int) {
	q := declare(b, url, quorum)
	c := connect(b, url, acemq.WithMaxOutstanding(window))
	p := acemq.NewPublisher[Order](c, "")
	ctx := ctxFor(b, 10*time.Minute)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeter()
	pace := newPacer(rate)
	for range senders {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				pace.wait(int(i))
				if _, err := p.Send(ctx, q, NewOrderCached(), acemq.WithEnvelope(newFullEnvelope())); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	m.Stop(b, b.N)
}

// driverMessage is the raw+headers publish as a driver message.
func driverMessage(q string, seq uint64) driver.Message {
	p := rawPublishing(seq, true)
	return driver.Message{
		RoutingKey: q, Mandatory: true, ContentType: p.ContentType, MessageID: p.MessageId,
		Headers: driver.Table(p.Headers), Body: p.Body,
	}
}

func driverPublishBatch(b *testing.B, url string) {
	q := declare(b, url, quorum)
	t := brokertest.Driver(connect(b, url, acemq.WithMaxOutstanding(window)))
	ctx := ctxFor(b, 10*time.Minute)
	batch := make([]driver.Message, 0, window)
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeter()
	for sent := 0; sent < b.N; {
		batch = batch[:0]
		for i := 0; i < window && sent+i < b.N; i++ {
			batch = append(batch, driverMessage(q, uint64(sent+i)))
		}
		for _, err := range t.PublishBatch(ctx, batch) {
			if err != nil {
				b.Fatal(err)
			}
		}
		sent += len(batch)
	}
	m.Stop(b, b.N)
}

func driverPublishConcurrent(b *testing.B, url string) {
	q := declare(b, url, quorum)
	t := brokertest.Driver(connect(b, url, acemq.WithMaxOutstanding(window)))
	ctx := ctxFor(b, 10*time.Minute)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeter()
	for range senders {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				if err := t.Publish(ctx, driverMessage(q, uint64(i))); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	m.Stop(b, b.N)
}
