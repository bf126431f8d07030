package main

import (
	"context"
	"fmt"
	"sync"
	"time"

	"github.com/acemq/acemq/internal/perf"
	amqp "github.com/rabbitmq/amqp091-go"
	"github.com/schollz/progressbar/v3"
)

// The --compare-raw half of bench: the same work through plain amqp091-go,
// with the raw references of internal/perf, which its benchmarks measure
// acemq against too: confirm mode, mandatory, persistent, the same
// windows, prefetch and acknowledgements. With headers (raw-headers, the
// benchmarks' "rawhdr") the raw client writes by hand the headers acemq's
// contract puts on every message (the envelope of a message sent on
// b.conn, with UUID message ids), so that the ratio prices what the
// library does; without (raw), it sends the body alone, and the ratio
// adds the bytes the contract costs.

// rawDial opens the raw client's connection.
func (b *bench) rawDial() (*amqp.Connection, error) {
	return perf.DialRaw(b.url, "acemq-bench (raw amqp091-go)", b.tls)
}

// rawEnvelope writes the headers acemq writes on a message published with
// a fresh envelope on b.conn; without headers it is nil (bare bodies).
func (b *bench) rawEnvelope(headers bool) *perf.EnvelopeTable {
	if !headers {
		return nil
	}
	return perf.Envelope{Origin: b.conn.Origin()}.Prepare()
}

// rawClientName is the raw client's name in the results.
func rawClientName(headers bool) string {
	if headers {
		return rawHeadersClient
	}
	return rawClient
}

// rawPubSub publishes and consumes through amqp091-go: f.consumers
// consumers at f.prefetch, each on a channel of its own as acemq's are, and
// f.producers producers, each on a confirm-mode channel of its own keeping
// up to f.window publishes waiting for their confirm; with headers, each
// message carries the contract's headers.
func (b *bench) rawPubSub(ctx context.Context, headers bool) (pub, con benchResult, err error) {
	f := b.f
	client := rawClientName(headers)
	pub, con = benchResult{Phase: "publish", Client: client, Messages: f.messages}, benchResult{Phase: "consume", Client: client, Messages: f.messages}
	q, err := b.queue(ctx, client)
	if err != nil {
		return pub, con, err
	}
	conn, err := b.rawDial()
	if err != nil {
		return pub, con, err
	}
	defer conn.Close()
	env := b.rawEnvelope(headers)

	var conLat perf.Latencies
	done := perf.NewCountdown(f.messages)
	consumers, err := b.rawConsumers(conn, q, client, &conLat, done)
	defer func() {
		for _, c := range consumers {
			_ = c.Close()
		}
	}()
	if err != nil {
		return pub, con, err
	}
	shares := perf.Shares(f.messages, f.producers)
	publishers, err := rawPublishers(conn, len(shares))
	defer func() {
		for _, p := range publishers {
			_ = p.Close()
		}
	}()
	if err != nil {
		return pub, con, err
	}
	var pubLat perf.Latencies
	var firstErr firstError
	bar := b.bar(f.messages, "publish ("+client+")")
	start := time.Now()
	b.rawPublish(ctx, publishers, shares, q, env, bar, &pubLat, &firstErr)
	pubElapsed := time.Since(start)
	finish(bar)
	failed := f.messages - pubLat.Count() + returned(publishers, &firstErr)
	pub = phaseResult("publish", client, &pubLat, f.messages, failed, pubElapsed)
	if failed == 0 {
		done.Wait(ctx, benchStall)
	}
	con = phaseResult("consume", client, &conLat, f.messages, f.messages-conLat.Count(), conLat.Summary().Last.Sub(start))
	if e := firstErr.get(); e != nil {
		return pub, con, fmt.Errorf("publishing through amqp091-go: %w", e)
	}
	return pub, con, ctx.Err()
}

// rawPublish sends shares[i] messages to q through publishers[i], each
// keeping up to f.window publishes waiting for their confirm.
func (b *bench) rawPublish(ctx context.Context, publishers []*perf.RawPublisher, shares []int, q string, env *perf.EnvelopeTable, bar *progressbar.ProgressBar, lat *perf.Latencies, firstErr *firstError) {
	var wg sync.WaitGroup
	for i, n := range shares {
		p := publishers[i]
		wg.Go(func() {
			err := p.Window(ctx, "", q, n, b.f.window, false, func(int) amqp.Publishing {
				return perf.RawMessage(0, q, "application/octet-stream", b.body(), env)
			}, func(started time.Time) {
				lat.Since(started)
				tick(bar)
			})
			if err != nil {
				firstErr.set(err)
			}
		})
	}
	wg.Wait()
}

// returned is how many messages the publishers had returned unroutable.
func returned(publishers []*perf.RawPublisher, firstErr *firstError) int {
	n := 0
	for _, p := range publishers {
		r, err := p.Returned()
		n += int(r)
		if err != nil {
			firstErr.set(err)
		}
	}
	return n
}

// rawConsumers starts f.consumers consumers on q, each on a channel of
// its own, recording the latency of what it is delivered; it returns those
// it started, also when one fails to start.
func (b *bench) rawConsumers(conn *amqp.Connection, q, client string, lat *perf.Latencies, done *perf.Countdown) ([]*perf.RawConsumer, error) {
	var consumers []*perf.RawConsumer
	for i := range b.f.consumers {
		c, err := perf.StartRawConsumer(conn, perf.RawConsumerConfig{
			Queue: q, Tag: fmt.Sprintf("acemq-bench-%s-%d", client, i+1), Prefetch: b.f.prefetch, Handlers: 1, Done: done,
			Handle: func(d amqp.Delivery) { delivered(lat, d.Body) },
		})
		if err != nil {
			return consumers, err
		}
		consumers = append(consumers, c)
	}
	return consumers, nil
}

// rawPublishers opens n confirm-mode publishers on conn; it returns those
// it opened, also when one fails to open.
func rawPublishers(conn *amqp.Connection, n int) ([]*perf.RawPublisher, error) {
	var publishers []*perf.RawPublisher
	for range n {
		p, err := perf.NewRawPublisher(conn)
		if err != nil {
			return publishers, err
		}
		publishers = append(publishers, p)
	}
	return publishers, nil
}

// rawRPC measures request/reply through amqp091-go, on one connection as
// acemq's side is: a responder that echoes the body with f.producers
// handlers at f.prefetch, publishing each reply confirmed before
// acknowledging the request, and callers sharing one requester, whose
// exclusive reply queue is read at rpc's reply prefetch; with headers,
// requests and replies carry the headers rpc writes on them.
func (b *bench) rawRPC(ctx context.Context, headers bool) (benchResult, error) {
	f := b.f
	client := rawClientName(headers)
	res := benchResult{Phase: "request", Client: client, Messages: f.requests}
	q, err := b.queue(ctx, "rpc-"+client)
	if err != nil {
		return res, err
	}
	conn, err := b.rawDial()
	if err != nil {
		return res, err
	}
	defer conn.Close()
	env := b.rawEnvelope(headers)
	resp, err := perf.StartRawResponder(conn, perf.RawResponderConfig{
		Queue: q, Prefetch: f.prefetch, Handlers: f.producers, Envelope: env,
		Answer: func(body []byte) ([]byte, error) { return body, nil },
	})
	if err != nil {
		return res, err
	}
	defer resp.Close()
	req, err := perf.NewRawRequester(conn, "", q, env)
	if err != nil {
		return res, err
	}
	defer req.Close()
	return b.rounds(ctx, client, "asking through amqp091-go", func() error {
		_, err := req.Ask(ctx, "application/octet-stream", b.body(), benchCallTimeout)
		return err
	})
}
