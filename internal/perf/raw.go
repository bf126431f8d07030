package perf

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/wire"
	amqp "github.com/rabbitmq/amqp091-go"
)

// The raw references: the work acemq does, written with plain amqp091-go
// as a careful application would write it by hand — confirm mode,
// mandatory and persistent publishes, manual acknowledgements one at a
// time, the same prefetch — without envelopes, codecs or settlement. Given
// an *EnvelopeTable, they also write by hand the headers acemq's contract
// puts on every message, with UUID message ids: the "rawhdr" reference,
// which pays for the same bytes as acemq. The benchmarks of this package and
// `acemq bench --compare-raw` both measure acemq against them.

// RawDialTimeout bounds DialRaw's connection attempt (amqp091-go's own
// default).
const RawDialTimeout = 30 * time.Second

// RawReplyPrefetch is the prefetch of a RawRequester's reply consumer:
// what rpc.Open's reply consumer uses.
const RawReplyPrefetch = acemq.DefaultPrefetch

// ErrNacked is returned for a publish the broker refused to confirm.
var ErrNacked = errors.New("the broker nacked a publish")

// DialRaw opens a plain amqp091-go connection named name in the broker's
// management UI. tlsCfg is for amqps:// URLs (nil verifies the broker with
// the system roots).
func DialRaw(url, name string, tlsCfg *tls.Config) (*amqp.Connection, error) {
	cfg := amqp.Config{Properties: amqp.NewConnectionProperties(), TLSClientConfig: tlsCfg, Dial: amqp.DefaultDial(RawDialTimeout)}
	cfg.Properties.SetClientConnectionName(name)
	c, err := amqp.DialConfig(url, cfg)
	if err != nil {
		return nil, fmt.Errorf("plain amqp091-go could not connect: %w", err)
	}
	return c, nil
}

// RawMessage is message seq of a raw reference: persistent, with
// contentType and body. With env it carries env's headers for routingKey
// and, as its message id, a fresh UUID, as acemq's messages do; without,
// the decimal sequence number and no headers.
func RawMessage(seq uint64, routingKey, contentType string, body []byte, env *EnvelopeTable) amqp.Publishing {
	p := amqp.Publishing{ContentType: contentType, DeliveryMode: amqp.Persistent, Body: body}
	if env == nil {
		p.MessageId = strconv.FormatUint(seq, 10)
		return p
	}
	p.MessageId = NewID()
	p.Headers = env.For(p.MessageId, routingKey)
	return p
}

// RawPublisher publishes mandatory messages on one confirm-mode channel.
// Use it either for Window (one goroutine) or for Send (any number of
// goroutines at once), not both: Window reads the channel's confirmations
// in order, which Send's publishes would then also produce.
type RawPublisher struct {
	ch       *amqp.Channel
	windowed atomic.Bool
	confirms chan amqp.Confirmation
	tags     uint64 // delivery tags handed out by Window
	broken   error  // a Window that failed leaves confirms unread

	returned    atomic.Int64
	firstReturn atomic.Pointer[amqp.Return]
	returnsDone chan struct{}
}

// NewRawPublisher opens a confirm-mode channel on conn.
func NewRawPublisher(conn *amqp.Connection) (*RawPublisher, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Confirm(false); err != nil {
		_ = ch.Close()
		return nil, err
	}
	p := &RawPublisher{ch: ch, returnsDone: make(chan struct{})}
	returns := ch.NotifyReturn(make(chan amqp.Return, 1))
	go func() {
		defer close(p.returnsDone)
		for r := range returns {
			if p.returned.Add(1) == 1 {
				p.firstReturn.Store(&r)
			}
		}
	}()
	return p, nil
}

// Returned counts the messages the broker returned as unroutable (they
// are confirmed all the same), with the first one's reason.
func (p *RawPublisher) Returned() (int64, error) {
	n := p.returned.Load()
	if r := p.firstReturn.Load(); r != nil {
		return n, fmt.Errorf("returned by the broker: %d %s", r.ReplyCode, r.ReplyText)
	}
	return n, nil
}

// Close closes the channel.
func (p *RawPublisher) Close() error {
	err := p.ch.Close()
	<-p.returnsDone
	return err
}

// Window publishes n messages to exchange with routingKey, keeping up to
// window of them waiting for a confirm: a sliding window over the
// channel's confirmations (NotifyPublish), the most one goroutine gets out
// of amqp091-go. batched waits instead for every confirm of each window
// before sending the next, as acemq's PublishBatch and SendAll do. msg
// builds message i (from 0) just before it is published; confirmed, when
// not nil, is called as each confirm arrives, in order, with the time its
// publish began. Window stops at the first failure (a refused publish, a
// nack, ctx done); the publisher is then unusable.
func (p *RawPublisher) Window(ctx context.Context, exchange, routingKey string, n, window int, batched bool, msg func(i int) amqp.Publishing, confirmed func(started time.Time)) error {
	if p.broken != nil {
		return p.broken
	}
	if window < 1 {
		return fmt.Errorf("a window of %d publishes: it must be at least 1", window)
	}
	if p.windowed.CompareAndSwap(false, true) {
		p.confirms = p.ch.NotifyPublish(make(chan amqp.Confirmation, window))
	}
	err := p.window(ctx, exchange, routingKey, n, window, batched, msg, confirmed)
	if err != nil {
		p.broken = fmt.Errorf("an earlier Window failed: %w", err)
	}
	return err
}

func (p *RawPublisher) window(ctx context.Context, exchange, routingKey string, n, window int, batched bool, msg func(i int) amqp.Publishing, confirmed func(time.Time)) error {
	base := p.tags
	var started []time.Time
	if confirmed != nil {
		started = make([]time.Time, window)
	}
	outstanding := 0
	await := func() error {
		select {
		case c, ok := <-p.confirms:
			if !ok {
				return amqp.ErrClosed
			}
			outstanding--
			if !c.Ack {
				return ErrNacked
			}
			if confirmed != nil {
				confirmed(started[(c.DeliveryTag-base-1)%uint64(window)])
			}
			return nil
		case <-ctx.Done():
			return ctx.Err()
		}
	}
	for i := range n {
		if outstanding == window {
			keep := window - 1
			if batched {
				keep = 0
			}
			for outstanding > keep {
				if err := await(); err != nil {
					return err
				}
			}
		}
		m := msg(i)
		if started != nil {
			started[i%window] = time.Now()
		}
		if err := p.ch.PublishWithContext(ctx, exchange, routingKey, true, false, m); err != nil {
			return err
		}
		p.tags++
		outstanding++
	}
	for outstanding > 0 {
		if err := await(); err != nil {
			return err
		}
	}
	return nil
}

// Send publishes m to exchange with routingKey and waits for its confirm.
// Many goroutines may Send on one publisher at once.
func (p *RawPublisher) Send(ctx context.Context, exchange, routingKey string, m amqp.Publishing) error {
	if p.windowed.Load() {
		return errors.New("Send on a RawPublisher used for Window")
	}
	dc, err := p.ch.PublishWithDeferredConfirmWithContext(ctx, exchange, routingKey, true, false, m)
	if err != nil {
		return err
	}
	ok, err := dc.WaitContext(ctx)
	if err != nil {
		return err
	}
	if !ok {
		return ErrNacked
	}
	return nil
}

// Countdown counts operations down to zero: consumers tick it as they
// finish a message, and whoever waits for the last one watches Done.
type Countdown struct {
	left atomic.Int64
	done chan struct{}
}

// NewCountdown returns a countdown from n.
func NewCountdown(n int) *Countdown {
	c := &Countdown{done: make(chan struct{})}
	c.left.Store(int64(n))
	if n <= 0 {
		close(c.done)
	}
	return c
}

// Tick counts one operation done; the one that reaches zero closes Done.
func (c *Countdown) Tick() {
	if c.left.Add(-1) == 0 {
		close(c.done)
	}
}

// Done is closed once the countdown reaches zero.
func (c *Countdown) Done() <-chan struct{} { return c.done }

// Left is how many operations are still to come.
func (c *Countdown) Left() int { return int(max(c.left.Load(), 0)) }

// Wait returns true once the countdown reaches zero, or false when ctx
// ends first or stall passes without a Tick.
func (c *Countdown) Wait(ctx context.Context, stall time.Duration) bool {
	tick := time.NewTicker(min(100*time.Millisecond, stall))
	defer tick.Stop()
	last, since := c.Left(), time.Now()
	for {
		select {
		case <-c.done:
			return true
		case <-ctx.Done():
			return false
		case <-tick.C:
			if n := c.Left(); n != last {
				last, since = n, time.Now()
			} else if time.Since(since) > stall {
				return false
			}
		}
	}
}

// RawConsumerConfig describes a RawConsumer.
type RawConsumerConfig struct {
	Queue string
	// Tag is the consumer tag ("" lets the broker choose one).
	Tag string
	// Prefetch is the channel's Qos.
	Prefetch int
	// Handlers is how many goroutines read the deliveries (at least 1).
	Handlers int
	// Handle, when not nil, sees each delivery before it is acknowledged.
	Handle func(d amqp.Delivery)
	// Done, when not nil, is ticked after each acknowledgement.
	Done *Countdown
}

// RawConsumer reads a queue on a channel of its own with manual
// acknowledgements, one at a time (Ack(false)), in Handlers goroutines
// ranging over the same deliveries.
type RawConsumer struct {
	ch      *amqp.Channel
	stopped chan struct{}
	err     atomic.Pointer[error]
}

// StartRawConsumer subscribes to cfg.Queue on a new channel of conn.
func StartRawConsumer(conn *amqp.Connection, cfg RawConsumerConfig) (*RawConsumer, error) {
	ch, err := conn.Channel()
	if err != nil {
		return nil, err
	}
	if err := ch.Qos(cfg.Prefetch, 0, false); err != nil {
		_ = ch.Close()
		return nil, err
	}
	dels, err := ch.Consume(cfg.Queue, cfg.Tag, false, false, false, false, nil)
	if err != nil {
		_ = ch.Close()
		return nil, err
	}
	c := &RawConsumer{ch: ch, stopped: make(chan struct{})}
	var wg sync.WaitGroup
	for range max(cfg.Handlers, 1) {
		wg.Go(func() {
			for d := range dels {
				if cfg.Handle != nil {
					cfg.Handle(d)
				}
				if err := d.Ack(false); err != nil {
					c.fail(err)
				}
				if cfg.Done != nil {
					cfg.Done.Tick()
				}
			}
		})
	}
	go func() { wg.Wait(); close(c.stopped) }()
	return c, nil
}

// Stopped is closed when the deliveries have stopped: after Close, or when
// the broker or the connection closed the channel.
func (c *RawConsumer) Stopped() <-chan struct{} { return c.stopped }

// fail records err unless an earlier failure was recorded. (Out of line,
// so that the error escapes only when there is one.)
func (c *RawConsumer) fail(err error) { c.err.CompareAndSwap(nil, &err) }

// Err is the first acknowledgement that failed, or nil.
func (c *RawConsumer) Err() error {
	if e := c.err.Load(); e != nil {
		return *e
	}
	return nil
}

// Close closes the channel and waits for the handlers to return.
func (c *RawConsumer) Close() error {
	err := c.ch.Close()
	<-c.stopped
	return err
}

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
