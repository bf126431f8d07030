package perf

import (
	"context"
	"encoding/json"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/rpc"
	"github.com/google/uuid"
	amqp "github.com/rabbitmq/amqp091-go"
)

// The responder's shape, the same on both sides.
const (
	rpcCallers        = 32
	rpcResponderConc  = 8
	rpcReplyPrefetch  = acemq.DefaultPrefetch // what rpc.Open's reply consumer uses
	rpcRequestTimeout = 30 * time.Second
)

// BenchmarkRPC compares request/reply through a classic request queue,
// b.N calls per run, each carrying the 256-byte JSON Order and answered
// with it.
//
//   - seq: one caller, one call at a time; reports the p50 and p99 round
//     trip.
//   - c32: 32 callers at once; reports calls/s (as msgs/s). rawhdr is raw
//     writing, on the request and on the reply, a fresh header table of
//     the fields acemq writes there (for reference: what the envelopes
//     cost amqp091 and the broker).
//
// Requester and responder have a connection each. raw mirrors what rpc
// does: the request is published persistent, mandatory and confirmed with
// reply-to and correlation-id to the request queue; the caller waits for
// both the confirm and the reply, which arrives on an exclusive,
// auto-delete reply queue read with manual acks at prefetch 20. The
// responder reads the request queue at prefetch 200 with 8 goroutines,
// decodes the request, publishes the answer (confirmed, not mandatory) to
// the reply-to queue, waits for that confirm and acks. acemq uses
// rpc.Open and Requester.Ask against rpc.Serve with Concurrency(8) and
// Prefetch(200).
func BenchmarkRPC(b *testing.B) {
	url := brokerURL(b)
	b.Run("seq", func(b *testing.B) {
		compare(b,
			side{"raw", func(b *testing.B) { runRPC(b, 1, newRawRPC(b, url, false)) }},
			side{"acemq", func(b *testing.B) { runRPC(b, 1, newAcemqRPC(b, url)) }})
	})
	b.Run("c32", func(b *testing.B) {
		compare(b,
			side{"raw", func(b *testing.B) { runRPC(b, rpcCallers, newRawRPC(b, url, false)) }},
			side{"rawhdr", func(b *testing.B) { runRPC(b, rpcCallers, newRawRPC(b, url, true)) }},
			side{"acemq", func(b *testing.B) { runRPC(b, rpcCallers, newAcemqRPC(b, url)) }})
	})
}

// asker makes one call.
type asker func(ctx context.Context, o Order) (Order, error)

func runRPC(b *testing.B, callers int, ask asker) {
	ctx := ctxFor(b, 10*time.Minute)
	order := NewOrderCached()
	// One call before timing: the first round trip sets up what the broker
	// and the runtime set up lazily.
	if _, err := ask(ctx, order); err != nil {
		b.Fatal(err)
	}
	lat := make([][]time.Duration, callers)
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeter()
	for g := range callers {
		wg.Go(func() {
			for next.Add(1) <= int64(b.N) {
				t0 := time.Now()
				if _, err := ask(ctx, order); err != nil {
					b.Error(err)
					return
				}
				lat[g] = append(lat[g], time.Since(t0))
			}
		})
	}
	wg.Wait()
	m.stop(b, b.N)
	var all []time.Duration
	for _, l := range lat {
		all = append(all, l...)
	}
	b.ReportMetric(float64(percentile(all, 0.50).Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(percentile(all, 0.99).Nanoseconds())/1e3, "p99-µs")
}

func newAcemqRPC(b *testing.B, url string) asker {
	q := declare(b, url, classic)
	server := connect(b, url)
	ctx := ctxFor(b, time.Minute)
	resp, err := rpc.Serve(ctx, server, q, func(_ context.Context, m acemq.Message[Order]) (Order, error) {
		return m.Payload, nil
	}, acemq.Concurrency(rpcResponderConc), acemq.Prefetch(prefetch), acemq.NoDeclare())
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = resp.Close(context.Background()) })
	client := connect(b, url)
	req, err := rpc.Open[Order, Order](ctx, client, "", q, rpc.Timeout(rpcRequestTimeout))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = req.Close(context.Background()) })
	return func(ctx context.Context, o Order) (Order, error) { return req.Ask(ctx, o) }
}

// rawRequester is a request/reply client written with amqp091 alone.
type rawRequester struct {
	pub     *amqp.Channel
	queue   string
	reply   string
	headers bool
	seq     atomic.Uint64
	mu      sync.Mutex
	calls   map[string]chan amqp.Delivery
}

// newRawRPC starts a raw responder and returns a raw requester's call;
// with headers, both write the header tables acemq writes.
func newRawRPC(b *testing.B, url string, headers bool) asker {
	q := declare(b, url, classic)
	startRawResponder(b, url, q, headers)

	ac := dialRaw(b, url)
	sub, err := ac.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := sub.Qos(rpcReplyPrefetch, 0, false); err != nil {
		b.Fatal(err)
	}
	rq, err := sub.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	dels, err := sub.Consume(rq.Name, "", false, true, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	pub, err := ac.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		b.Fatal(err)
	}
	r := &rawRequester{pub: pub, queue: q, reply: rq.Name, headers: headers, calls: map[string]chan amqp.Delivery{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		for d := range dels {
			r.mu.Lock()
			c, ok := r.calls[d.CorrelationId]
			delete(r.calls, d.CorrelationId)
			r.mu.Unlock()
			if ok {
				c <- d
			}
			_ = d.Ack(false)
		}
	})
	b.Cleanup(func() { _ = sub.Close(); wg.Wait() })
	return r.ask
}

func (r *rawRequester) ask(ctx context.Context, o Order) (Order, error) {
	body, err := json.Marshal(o)
	if err != nil {
		return Order{}, err
	}
	id := strconv.FormatUint(r.seq.Add(1), 10)
	if r.headers {
		id = uuid.NewString() // as rpc does: the contract's ids are UUIDs
	}
	c := make(chan amqp.Delivery, 1)
	r.mu.Lock()
	r.calls[id] = c
	r.mu.Unlock()
	ctx, cancel := context.WithTimeout(ctx, rpcRequestTimeout)
	defer cancel()
	p := amqp.Publishing{
		ContentType: "application/json", DeliveryMode: amqp.Persistent,
		MessageId: id, CorrelationId: id, ReplyTo: r.reply, Body: body,
	}
	if r.headers {
		p.Headers = rawRequestHeaders(id, r.queue, r.reply)
	}
	dc, err := r.pub.PublishWithDeferredConfirmWithContext(ctx, "", r.queue, true, false, p)
	if err != nil {
		return Order{}, err
	}
	if ok, err := dc.WaitContext(ctx); err != nil || !ok {
		return Order{}, errNoConfirm
	}
	select {
	case d := <-c:
		var rep Order
		return rep, json.Unmarshal(d.Body, &rep)
	case <-ctx.Done():
		return Order{}, ctx.Err()
	}
}

var errNoConfirm = errorString("the broker did not confirm the request")

type errorString string

func (e errorString) Error() string { return string(e) }

// rawRequestHeaders is the header table rpc's requester writes on a
// request: the envelope's always-written fields, its origin, and the reply
// address.
func rawRequestHeaders(id, queue, replyTo string) amqp.Table {
	return amqp.Table{
		"x-acemq-id": id, "x-acemq-type": queue, "x-acemq-version": int32(1),
		"x-acemq-correlation": id, "x-acemq-attempt": int32(1),
		"x-acemq-first-seen": time.Now().UnixMilli(), "x-acemq-origin": "perf@bench",
		"acemq-reply-to": replyTo,
	}
}

// rawReplyHeaders is the header table rpc's responder writes on a reply:
// a fresh id, the request's correlation, the request's id as causation.
func rawReplyHeaders(id, queue string, request amqp.Table) amqp.Table {
	return amqp.Table{
		"x-acemq-id": id, "x-acemq-type": queue, "x-acemq-version": int32(1),
		"x-acemq-correlation": request["x-acemq-correlation"], "x-acemq-causation": request["x-acemq-id"],
		"x-acemq-attempt": int32(1), "x-acemq-first-seen": time.Now().UnixMilli(),
		"x-acemq-origin": "perf@bench",
	}
}

// startRawResponder answers requests on q with amqp091 alone; with
// headers, each reply carries the header table rpc's responder writes.
func startRawResponder(b *testing.B, url, q string, headers bool) {
	ac := dialRaw(b, url)
	sub, err := ac.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := sub.Qos(prefetch, 0, false); err != nil {
		b.Fatal(err)
	}
	dels, err := sub.Consume(q, "", false, false, false, false, nil)
	if err != nil {
		b.Fatal(err)
	}
	pub, err := ac.Channel()
	if err != nil {
		b.Fatal(err)
	}
	if err := pub.Confirm(false); err != nil {
		b.Fatal(err)
	}
	ctx := context.Background()
	var wg sync.WaitGroup
	for range rpcResponderConc {
		wg.Go(func() {
			for d := range dels {
				var o Order
				if err := json.Unmarshal(d.Body, &o); err != nil {
					_ = d.Nack(false, false)
					continue
				}
				body, _ := json.Marshal(o)
				p := amqp.Publishing{
					ContentType: "application/json", DeliveryMode: amqp.Persistent, CorrelationId: d.CorrelationId, Body: body,
				}
				if headers {
					id := uuid.NewString()
					p.MessageId = id
					p.Headers = rawReplyHeaders(id, d.ReplyTo, d.Headers)
				}
				dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, "", d.ReplyTo, false, false, p)
				if err == nil {
					dc.Wait()
				}
				_ = d.Ack(false)
			}
		})
	}
	b.Cleanup(func() { _ = sub.Close(); wg.Wait() })
}
