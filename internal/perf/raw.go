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

	amqp "github.com/rabbitmq/amqp091-go"
)

// The raw references: the work acemq does, written with plain amqp091-go
// as a careful application would write it by hand — confirm mode,
// mandatory and persistent publishes, manual acknowledgements one at a
// time, the same prefetch — without envelopes, codecs or settlement. Given
// an *EnvelopeTable, they also write by hand the headers acemq's contract
// puts on every message, with UUID message ids: the "rawhdr" reference,
// which pays for the same bytes as acemq. The benchmarks of this package and
// `acemq-bench --compare-raw` both measure acemq against them.

// RawDialTimeout bounds DialRaw's connection attempt (amqp091-go's own
// default).
const RawDialTimeout = 30 * time.Second

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
