package rabbitmq

import (
	"errors"
	"io"
	"net"
	"net/url"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestLostIsEmittedOnlyOnceDeliveriesCannotBeSettled checks the guarantee
// the acemq engine's retry path relies on: by the time OnEvent hears of
// EventLost, every delivery of the lost session, consumed or fetched with
// Get, answers CanSettle false (else the engine publishes a retry copy
// while the broker redelivers the original, and the message runs twice).
//
// amqp091 marks its connection closed and tells the connection's
// NotifyClose listeners (the supervisor) before it shuts down the
// channels one by one, so for a while a channel of a lost connection still
// reports IsClosed false. The test holds that window open: blocker
// channels on the same connection sit in a publish that cannot finish (the
// proxy stops reading what the client sends), each holding its channel's
// lock, and the proxy then ends the connection towards the client with a
// FIN so that amqp091's reader sees the loss while the writes stay
// blocked. amqp091's loop over the channels stops at the first blocker
// until the test releases them. The loop visits channels in map order, so
// the consumer's or the Get channel may come before every blocker; the
// test checks whether the window was really hit for each (its amqp091
// channel still open when CanSettle answered) and cuts again until it was
// for both.
func TestLostIsEmittedOnlyOnceDeliveriesCannotBeSettled(t *testing.T) {
	fastBackoff(t)
	p := newStallProxy(t)
	type check struct {
		canSettle bool // what the delivery said in the EventLost callback
		chanOpen  bool // its amqp091 channel was still open after that
	}
	const consumed, fetched = 0, 1 // indexes of the deliveries held
	var (
		held   atomic.Pointer[[2]*driver.Delivery] // the deliveries to ask at the next EventLost
		checks = make(chan [2]check, 1)
	)
	c := openTest(t, func(cfg *driver.Config) {
		cfg.URLs = []string{p.url()}
		cfg.OnEvent = func(e driver.Event) {
			if e.Kind != driver.EventLost {
				return
			}
			ds := held.Swap(nil)
			if ds == nil {
				return
			}
			var r [2]check
			for i, d := range ds {
				// CanSettle first: a channel still open after it
				// answered was open when it answered.
				r[i].canSettle = d.CanSettle()
				r[i].chanOpen = !d.Acknowledger.(*acker).ch.IsClosed()
			}
			checks <- r
		}
	})
	ctx := ctxFor(t, 3*time.Minute)
	// One message circulates on each queue: each loss puts it back and the
	// resubscribed consumer, or the next Get, has it again.
	q := tempQueue(t, c, driver.Queue{})
	gq := tempQueue(t, c, driver.Queue{})
	for _, m := range []driver.Message{{RoutingKey: q, MessageID: "consumed"}, {RoutingKey: gq, MessageID: "fetched"}} {
		if err := c.Publish(ctx, m); err != nil {
			t.Fatal(err)
		}
	}
	sub, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q, Prefetch: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	get := func() driver.Delivery {
		t.Helper()
		var d driver.Delivery
		testenv.Eventually(t, "a message from Get", func() bool {
			var (
				ok  bool
				err error
			)
			d, ok, err = c.Get(ctx, gq)
			if err != nil {
				t.Fatalf("Get: %v", err)
			}
			return ok
		})
		return d
	}

	const (
		attempts = 10
		blockers = 32
	)
	body := make([]byte, 16<<20) // far more than the socket buffers hold
	nowhere := uniqueName("nowhere")
	var hit [2]bool
	for attempt := 1; attempt <= attempts && !(hit[consumed] && hit[fetched]); attempt++ {
		ds := [2]*driver.Delivery{consumed: new(settleable(t, sub)), fetched: new(get())}
		s := c.cur.Load()
		if s == nil || s.ac.IsClosed() || !ds[fetched].CanSettle() {
			t.Fatal("no live session while the deliveries can be settled")
		}
		r := func() [2]check {
			var wg sync.WaitGroup
			defer func() {
				held.Store(nil)
				p.release()
				wg.Wait()
			}()
			chans := make([]*amqp.Channel, blockers)
			for i := range chans {
				ch, err := s.ac.Channel()
				if err != nil {
					t.Fatalf("opening a blocker channel: %v", err)
				}
				chans[i] = ch
			}
			p.freeze()
			for _, ch := range chans {
				wg.Add(1)
				go func() {
					defer wg.Done()
					_ = ch.Publish("", nowhere, false, false, amqp.Publishing{Body: body})
				}()
			}
			// Let the publishes block: one in the socket write, the others
			// waiting for it, each holding its channel's lock. One that
			// is late only makes a miss more likely.
			time.Sleep(100 * time.Millisecond)
			held.Store(&ds)
			p.lose()
			var r [2]check
			select {
			case r = <-checks:
			case <-time.After(testenv.Patience):
				t.Fatal("no EventLost after the connection was lost")
			}
			for i, what := range [2]string{consumed: "consumed delivery", fetched: "delivery fetched with Get"} {
				if r[i].canSettle {
					t.Errorf("attempt %d: EventLost was emitted while a %s of the lost session said it could still be settled (its amqp091 channel open: %v)", attempt, what, r[i].chanOpen)
				} else if r[i].chanOpen {
					// Still inside the window: settling fails at once.
					if err := ds[i].Ack(); !errors.Is(err, driver.ErrChannelClosed) {
						t.Errorf("ack of a %s of the lost session: %v", what, err)
					}
				}
			}
			if t.Failed() {
				t.FailNow()
			}
			return r
		}()
		for i := range hit {
			hit[i] = hit[i] || r[i].chanOpen
		}
		t.Logf("attempt %d: window hit for the consumed delivery: %v, for the fetched one: %v", attempt, r[consumed].chanOpen, r[fetched].chanOpen)
	}
	if !hit[consumed] || !hit[fetched] {
		t.Fatalf("in %d attempts the window was not hit for each delivery (consumed: %v, fetched: %v); the test no longer reproduces it", attempts, hit[consumed], hit[fetched])
	}
	// The messages come back on the recovered session and settle there.
	d := settleable(t, sub)
	g := get()
	if !d.Redelivered || d.MessageID != "consumed" || !g.Redelivered || g.MessageID != "fetched" {
		t.Fatalf("after recovery got %+v and %+v", d, g)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	if err := g.Ack(); err != nil {
		t.Fatal(err)
	}
}

// settleable receives from sub until a delivery can be settled, skipping
// those of a session already lost (the broker redelivers them).
func settleable(t *testing.T, sub driver.Subscription) driver.Delivery {
	t.Helper()
	for {
		d := recvOne(t, sub)
		if d.CanSettle() {
			return d
		}
	}
}

// stallProxy is a TCP proxy in front of the test broker that loses a
// connection in slow motion. freeze stops reading what the client sends, so
// that the client's writes back up and block; lose closes the broker's side
// and sends the client a FIN (its reader sees the connection end) while
// still not reading, so the client's writes stay blocked; release then
// closes the client's side, which fails those writes. Connections made
// later are proxied normally.
type stallProxy struct {
	t       testing.TB
	ln      net.Listener
	backend string

	mu    sync.Mutex
	links map[*stallLink]struct{}
	wg    sync.WaitGroup
}

type stallLink struct {
	client, broker *net.TCPConn
	frozen         atomic.Bool
	released       chan struct{}
	releaseOnce    sync.Once
}

func (l *stallLink) release() { l.releaseOnce.Do(func() { close(l.released) }) }

func newStallProxy(t testing.TB) *stallProxy {
	t.Helper()
	u, err := url.Parse(testenv.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	host := u.Host
	if u.Port() == "" {
		host = net.JoinHostPort(u.Hostname(), "5672")
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &stallProxy{t: t, ln: ln, backend: host, links: map[*stallLink]struct{}{}}
	p.wg.Add(1)
	go p.accept()
	t.Cleanup(p.close)
	return p
}

// url returns the broker URL through the proxy.
func (p *stallProxy) url() string {
	u, _ := url.Parse(testenv.AMQPURL(p.t))
	u.Scheme = "amqp"
	u.Host = p.ln.Addr().String()
	return u.String()
}

func (p *stallProxy) accept() {
	defer p.wg.Done()
	for {
		c, err := p.ln.Accept()
		if err != nil {
			return
		}
		b, err := net.DialTimeout("tcp", p.backend, 5*time.Second)
		if err != nil {
			_ = c.Close()
			continue
		}
		l := &stallLink{client: c.(*net.TCPConn), broker: b.(*net.TCPConn), released: make(chan struct{})}
		// A small receive buffer: the client's writes block sooner.
		_ = l.client.SetReadBuffer(16 << 10)
		p.mu.Lock()
		p.links[l] = struct{}{}
		p.mu.Unlock()
		p.wg.Add(1)
		go p.run(l)
	}
}

// run proxies l until both directions have ended, then closes it.
func (p *stallProxy) run(l *stallLink) {
	defer p.wg.Done()
	var dirs sync.WaitGroup
	dirs.Add(2)
	go func() { // client to broker
		defer dirs.Done()
		defer func() { _ = l.broker.Close() }()
		buf := make([]byte, 32<<10)
		for {
			if l.frozen.Load() {
				<-l.released
				return
			}
			n, err := l.client.Read(buf)
			if n > 0 {
				if _, werr := l.broker.Write(buf[:n]); werr != nil {
					return
				}
			}
			if err != nil {
				return
			}
		}
	}()
	go func() { // broker to client
		defer dirs.Done()
		defer func() { _ = l.client.CloseWrite() }()
		_, _ = io.Copy(l.client, l.broker)
	}()
	dirs.Wait()
	_ = l.client.Close()
	p.mu.Lock()
	delete(p.links, l)
	p.mu.Unlock()
}

// freeze stops reading from the clients of the current connections.
func (p *stallProxy) freeze() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.links {
		l.frozen.Store(true)
	}
}

// lose ends the frozen connections: the broker's side closes and the
// client sees the end of what the broker sends, but its writes still block.
func (p *stallProxy) lose() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.links {
		if l.frozen.Load() {
			_ = l.broker.Close()
		}
	}
}

// release closes the frozen connections on the client's side too, failing
// the client's blocked writes.
func (p *stallProxy) release() {
	p.mu.Lock()
	defer p.mu.Unlock()
	for l := range p.links {
		if l.frozen.Load() {
			_ = l.broker.Close()
			l.release()
		}
	}
}

func (p *stallProxy) close() {
	_ = p.ln.Close()
	p.mu.Lock()
	for l := range p.links {
		_ = l.broker.Close()
		_ = l.client.Close()
		l.release()
	}
	p.mu.Unlock()
	p.wg.Wait()
}
