package perf

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/wire"
	amqp "github.com/rabbitmq/amqp091-go"
)

// RawReplyPrefetch is the prefetch of a RawRequester's reply consumer:
// what rpc.Open's reply consumer uses.
const RawReplyPrefetch = acemq.DefaultPrefetch

// RawResponderConfig describes a RawResponder.
type RawResponderConfig struct {
	Queue string
	// Prefetch is the Qos of the channel the requests are read on.
	Prefetch int
	// Handlers is how many requests are answered at once (at least 1).
	Handlers int
	// Envelope, when not nil, makes every reply carry the headers acemq's
	// responder writes on one (docs/wire.md §8): the envelope's, with a
	// fresh UUID as id, the request's correlation and the request's id as
	// causation. Prepare it from Envelope{Origin: …}: a reply's type is
	// the reply queue's name.
	Envelope *EnvelopeTable
	// Answer turns a request body into the reply body. A request it fails
	// is rejected (nack without requeue).
	Answer func(body []byte) ([]byte, error)
}

// RawResponder answers requests as acemq's rpc.Serve does, with amqp091-go
// alone: it reads the request queue with manual acknowledgements, publishes
// each answer (persistent, confirmed, not mandatory, with the request's
// correlation-id and content type) to the request's reply-to queue, waits
// for that confirm and only then acknowledges the request.
type RawResponder struct {
	sub, pub *amqp.Channel
	wg       sync.WaitGroup
}

// StartRawResponder starts answering on cfg.Queue: one channel reads the
// requests, another publishes the replies.
func StartRawResponder(conn *amqp.Connection, cfg RawResponderConfig) (*RawResponder, error) {
	sub, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*RawResponder, error) { _ = sub.Close(); return nil, err }
	if err := sub.Qos(cfg.Prefetch, 0, false); err != nil {
		return fail(err)
	}
	pub, err := conn.Channel()
	if err != nil {
		return fail(err)
	}
	if err := pub.Confirm(false); err != nil {
		_ = pub.Close()
		return fail(err)
	}
	dels, err := sub.Consume(cfg.Queue, "", false, false, false, false, nil)
	if err != nil {
		_ = pub.Close()
		return fail(err)
	}
	r := &RawResponder{sub: sub, pub: pub}
	ctx := context.Background()
	for range max(cfg.Handlers, 1) {
		r.wg.Go(func() {
			for d := range dels {
				body, err := cfg.Answer(d.Body)
				if err != nil {
					_ = d.Nack(false, false)
					continue
				}
				p := amqp.Publishing{ContentType: d.ContentType, DeliveryMode: amqp.Persistent, CorrelationId: d.CorrelationId, Body: body}
				if cfg.Envelope != nil {
					p.MessageId = NewID()
					p.Headers = cfg.Envelope.write(p.MessageId, d.ReplyTo, d.Headers[wire.HeaderCorrelation], d.Headers[wire.HeaderID])
				}
				dc, err := pub.PublishWithDeferredConfirmWithContext(ctx, "", d.ReplyTo, false, false, p)
				if err == nil {
					_, err = dc.WaitContext(ctx)
				}
				if err != nil {
					_ = d.Nack(false, true)
					continue
				}
				_ = d.Ack(false)
			}
		})
	}
	return r, nil
}

// Close stops reading requests and waits for the answers under way.
func (r *RawResponder) Close() error {
	err := r.sub.Close()
	r.wg.Wait()
	if perr := r.pub.Close(); err == nil {
		err = perr
	}
	return err
}

// RawRequester asks questions as acemq's rpc.Requester does, with
// amqp091-go alone: each request is published persistent, mandatory and
// confirmed with a reply-to and a correlation-id; the caller waits for the
// confirm, then for the reply, which arrives on one exclusive, auto-delete
// reply queue read with manual acknowledgements at RawReplyPrefetch and is
// matched to its call by correlation-id. Many goroutines may Ask at once.
type RawRequester struct {
	sub, pub   *amqp.Channel
	exchange   string
	routingKey string
	reply      string
	env        *EnvelopeTable
	seq        atomic.Uint64
	mu         sync.Mutex
	calls      map[string]chan amqp.Delivery
	wg         sync.WaitGroup
}

// NewRawRequester declares the reply queue, starts its consumer and
// returns a requester publishing to exchange with routingKey. With env,
// every request carries the headers acemq's requester writes on one (env's,
// with a fresh UUID as id and correlation, and acemq-reply-to); without,
// the decimal sequence number as its id and no headers. Prepare env from
// an Envelope without a correlation: a request's correlation is its id.
func NewRawRequester(conn *amqp.Connection, exchange, routingKey string, env *EnvelopeTable) (*RawRequester, error) {
	sub, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	fail := func(err error) (*RawRequester, error) { _ = sub.Close(); return nil, err }
	if err := sub.Qos(RawReplyPrefetch, 0, false); err != nil {
		return fail(err)
	}
	rq, err := sub.QueueDeclare("", false, true, true, false, nil)
	if err != nil {
		return fail(err)
	}
	dels, err := sub.Consume(rq.Name, "", false, true, false, false, nil)
	if err != nil {
		return fail(err)
	}
	pub, err := conn.Channel()
	if err != nil {
		return fail(err)
	}
	if err := pub.Confirm(false); err != nil {
		_ = pub.Close()
		return fail(err)
	}
	r := &RawRequester{sub: sub, pub: pub, exchange: exchange, routingKey: routingKey, reply: rq.Name, env: env, calls: map[string]chan amqp.Delivery{}}
	r.wg.Go(func() {
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
	return r, nil
}

// ReplyQueue is the queue the replies arrive on.
func (r *RawRequester) ReplyQueue() string { return r.reply }

// Ask publishes a request with body and waits, for up to timeout, for the
// confirm and then the reply, whose body it returns.
func (r *RawRequester) Ask(ctx context.Context, contentType string, body []byte, timeout time.Duration) ([]byte, error) {
	var id string
	if r.env != nil {
		id = NewID() // as rpc does: the contract's ids are UUIDs
	} else {
		id = strconv.FormatUint(r.seq.Add(1), 10)
	}
	c := make(chan amqp.Delivery, 1)
	r.mu.Lock()
	r.calls[id] = c
	r.mu.Unlock()
	forget := func() { // a call that ends without its reply
		r.mu.Lock()
		delete(r.calls, id)
		r.mu.Unlock()
	}
	ctx, cancel := context.WithTimeout(ctx, timeout)
	defer cancel()
	p := amqp.Publishing{
		ContentType: contentType, DeliveryMode: amqp.Persistent,
		MessageId: id, CorrelationId: id, ReplyTo: r.reply, Body: body,
	}
	if r.env != nil {
		p.Headers = r.env.write(id, r.routingKey, nil, r.env.cause)
		p.Headers[wire.HeaderReplyTo] = r.reply
	}
	dc, err := r.pub.PublishWithDeferredConfirmWithContext(ctx, r.exchange, r.routingKey, true, false, p)
	if err != nil {
		forget()
		return nil, err
	}
	if ok, err := dc.WaitContext(ctx); err != nil || !ok {
		forget()
		if err == nil {
			err = ErrNacked
		}
		return nil, fmt.Errorf("the request was not confirmed: %w", err)
	}
	select {
	case d := <-c:
		return d.Body, nil
	case <-ctx.Done():
		forget()
		return nil, fmt.Errorf("no reply within %s: %w", timeout, ctx.Err())
	}
}

// Close stops the reply consumer (the broker then deletes the reply
// queue) and closes the channels.
func (r *RawRequester) Close() error {
	err := r.sub.Close()
	r.wg.Wait()
	if perr := r.pub.Close(); err == nil {
		err = perr
	}
	return err
}
