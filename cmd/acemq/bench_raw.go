package main

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"fmt"
	"sync"
	"sync/atomic"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
)

// The --compare-raw half of bench: the same work through plain amqp091-go,
// as a careful application would write it by hand (confirm mode, mandatory,
// persistent, manual acks, the same prefetch), without envelopes, codecs or
// settlement.

// rawDial opens a plain amqp091-go connection.
func rawDial(ctx context.Context, url string, tlsCfg *tls.Config) (*amqp.Connection, error) {
	cfg := amqp.Config{Properties: amqp.NewConnectionProperties(), Dial: amqp.DefaultDial(connectTimeout), TLSClientConfig: tlsCfg}
	cfg.Properties.SetClientConnectionName("acemq bench (raw amqp091-go)")
	conn, err := amqp.DialConfig(url, cfg)
	if err != nil {
		return nil, fmt.Errorf("plain amqp091-go could not connect: %w", err)
	}
	return conn, nil
}

// rawID is a message id like the library's, so both clients send one.
func rawID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}

// rawPubSub publishes and consumes through amqp091-go.
func rawPubSub(ctx context.Context, b *bench) (pub, con benchResult, err error) {
	f := b.f
	pub, con = benchResult{Phase: "publish", Client: "raw", Messages: f.messages}, benchResult{Phase: "consume", Client: "raw", Messages: f.messages}
	q, err := b.queue(ctx, "raw")
	if err != nil {
		return pub, con, err
	}
	conn, err := rawDial(ctx, b.url, b.tls)
	if err != nil {
		return pub, con, err
	}
	defer conn.Close()

	var conLat latencies
	var received atomic.Int64
	done := make(chan struct{})
	var cwg sync.WaitGroup
	var chans []*amqp.Channel
	for i := 0; i < f.consumers; i++ {
		ch, err := conn.Channel()
		if err != nil {
			return pub, con, err
		}
		chans = append(chans, ch)
		if err := ch.Qos(f.prefetch, 0, false); err != nil {
			return pub, con, err
		}
		ds, err := ch.Consume(q, fmt.Sprintf("acemq-bench-raw-%d", i+1), false, false, false, false, nil)
		if err != nil {
			return pub, con, err
		}
		cwg.Add(1)
		go func() {
			defer cwg.Done()
			for d := range ds {
				now := time.Now()
				if t, ok := sentAt(d.Body); ok {
					conLat.add(now.Sub(t), now)
				}
				_ = d.Ack(false)
				if received.Add(1) == int64(f.messages) {
					close(done)
				}
			}
		}()
	}
	defer func() {
		for _, ch := range chans {
			_ = ch.Close()
		}
		cwg.Wait()
	}()

	var pubLat latencies
	var failed atomic.Int64
	var firstErr firstError
	bar := b.bar(f.messages, "publish (raw)")
	start := time.Now()
	var wg sync.WaitGroup
	for _, n := range shares(f.messages, f.producers) {
		ch, err := conn.Channel()
		if err != nil {
			return pub, con, err
		}
		defer ch.Close()
		if err := ch.Confirm(false); err != nil {
			return pub, con, err
		}
		returns := ch.NotifyReturn(make(chan amqp.Return, 1))
		go func() {
			for r := range returns {
				failed.Add(1)
				firstErr.set(fmt.Errorf("returned: %d %s", r.ReplyCode, r.ReplyText))
			}
		}()
		wg.Add(1)
		go func(ch *amqp.Channel, n int) {
			defer wg.Done()
			sem := make(chan struct{}, f.window)
			var inner sync.WaitGroup
			for i := 0; i < n && ctx.Err() == nil; i++ {
				sem <- struct{}{}
				body := b.stamp()
				t0 := time.Now()
				dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, true, false, amqp.Publishing{
					DeliveryMode: amqp.Persistent, ContentType: "application/octet-stream", MessageId: rawID(), Body: body,
				})
				if err != nil {
					<-sem
					failed.Add(1)
					firstErr.set(err)
					continue
				}
				inner.Add(1)
				go func() {
					defer func() { <-sem; inner.Done() }()
					ok, err := dc.WaitContext(ctx)
					if err != nil || !ok {
						failed.Add(1)
						if err == nil {
							err = errors.New("the broker nacked a publish")
						}
						firstErr.set(err)
						return
					}
					pubLat.done(t0, bar)
				}()
			}
			inner.Wait()
		}(ch, n)
	}
	wg.Wait()
	pubElapsed := time.Since(start)
	if bar != nil {
		_ = bar.Finish()
	}
	pub = pubLat.result("publish", "raw", f.messages, int(failed.Load()), pubElapsed)
	if failed.Load() == 0 {
		awaitDeliveries(ctx, done, &received)
	}
	con = conLat.result("consume", "raw", f.messages, f.messages-conLat.count(), conLat.last.Sub(start))
	if e := firstErr.get(); e != nil {
		return pub, con, fmt.Errorf("publishing through amqp091-go: %w", e)
	}
	return pub, con, ctx.Err()
}

// rawRPC measures request/reply through amqp091-go: an echo responder that
// publishes each reply confirmed before acknowledging the request, and
// callers sharing one exclusive reply queue, matching on correlation-id.
func rawRPC(ctx context.Context, b *bench) (benchResult, error) {
	f := b.f
	res := benchResult{Phase: "request", Client: "raw", Messages: f.requests}
	q, err := b.queue(ctx, "rpc-raw")
	if err != nil {
		return res, err
	}
	conn, err := rawDial(ctx, b.url, b.tls)
	if err != nil {
		return res, err
	}
	defer conn.Close()

	// The responder: up to --producers requests at once, like the acemq one.
	var swg sync.WaitGroup
	var serverChans []*amqp.Channel
	defer func() {
		for _, ch := range serverChans {
			_ = ch.Close()
		}
		swg.Wait()
	}()
	for i := 0; i < f.producers; i++ {
		sch, err := conn.Channel()
		if err != nil {
			return res, err
		}
		serverChans = append(serverChans, sch)
		if err := sch.Qos(max(1, f.prefetch/f.producers), 0, false); err != nil {
			return res, err
		}
		if err := sch.Confirm(false); err != nil {
			return res, err
		}
		reqs, err := sch.Consume(q, "", false, false, false, false, nil)
		if err != nil {
			return res, err
		}
		swg.Add(1)
		go func(sch *amqp.Channel) {
			defer swg.Done()
			for d := range reqs {
				dc, err := sch.PublishWithDeferredConfirmWithContext(ctx, "", d.ReplyTo, false, false, amqp.Publishing{
					DeliveryMode: amqp.Persistent, ContentType: d.ContentType, CorrelationId: d.CorrelationId, MessageId: rawID(), Body: d.Body,
				})
				if err == nil {
					_, err = dc.WaitContext(ctx)
				}
				if err != nil {
					_ = d.Nack(false, true)
					continue
				}
				_ = d.Ack(false)
			}
		}(sch)
	}

	// The callers share one reply queue and one consumer.
	cch, err := conn.Channel()
	if err != nil {
		return res, err
	}
	defer cch.Close()
	if err := cch.Confirm(false); err != nil {
		return res, err
	}
	rq, err := cch.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return res, err
	}
	replies, err := cch.Consume(rq.Name, "", false, true, false, false, nil)
	if err != nil {
		return res, err
	}
	var mu sync.Mutex
	waiting := map[string]chan struct{}{}
	go func() {
		for d := range replies {
			mu.Lock()
			w, ok := waiting[d.CorrelationId]
			delete(waiting, d.CorrelationId)
			mu.Unlock()
			_ = d.Ack(false)
			if ok {
				close(w)
			}
		}
	}()

	return b.rounds(ctx, "raw", "asking through amqp091-go", func() error {
		id := rawID()
		w := make(chan struct{})
		mu.Lock()
		waiting[id] = w
		mu.Unlock()
		dc, err := cch.PublishWithDeferredConfirmWithContext(ctx, "", q, true, false, amqp.Publishing{
			DeliveryMode: amqp.Persistent, ContentType: "application/octet-stream", CorrelationId: id, MessageId: id, ReplyTo: rq.Name, Body: b.stamp(),
		})
		if err == nil {
			_, err = dc.WaitContext(ctx)
		}
		if err != nil {
			return err
		}
		tctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		defer cancel()
		select {
		case <-w:
			return nil
		case <-tctx.Done():
			return fmt.Errorf("no reply within 30s: %w", tctx.Err())
		}
	})
}
