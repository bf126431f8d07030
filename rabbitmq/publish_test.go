package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
)

func TestConfirmsUnderConcurrentSenders(t *testing.T) {
	c := openTest(t, nil)
	ctx := ctxFor(t, 60*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	const senders, each = 64, 100
	var wg sync.WaitGroup
	var failed atomic.Int64
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				err := c.Publish(ctx, driver.Message{
					RoutingKey: q, Mandatory: true, MessageID: fmt.Sprintf("%d-%d", s, i), Body: make([]byte, 256),
				})
				if err != nil {
					failed.Add(1)
					t.Errorf("Publish: %v", err)
					return
				}
			}
		})
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.FailNow()
	}
	info, err := c.InspectQueue(ctx, q)
	if err != nil || info.Messages != senders*each {
		t.Fatalf("queue holds %d messages (%v), want %d", info.Messages, err, senders*each)
	}
	if n := c.permits.held(); n != 0 {
		t.Errorf("%d permits still held after every confirm", n)
	}
}

func TestReturnsMatchedUnderLoad(t *testing.T) {
	c := openTest(t, nil)
	ctx := ctxFor(t, 60*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	ex := uniqueName("x")
	if err := c.DeclareExchange(ctx, driver.Exchange{Name: ex, Kind: driver.Direct, AutoDelete: false}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteExchange(t, ex) })
	if err := c.Bind(ctx, driver.Binding{Queue: q, Exchange: ex, RoutingKey: "routable"}); err != nil {
		t.Fatal(err)
	}
	const senders, each = 32, 100
	var wg sync.WaitGroup
	var routed atomic.Int64
	for s := range senders {
		wg.Go(func() {
			for i := range each {
				id := fmt.Sprintf("%d-%d", s, i)
				unroutable := (s+i)%3 == 0
				key := "routable"
				if unroutable {
					key = "nowhere-" + id
				}
				err := c.Publish(ctx, driver.Message{Exchange: ex, RoutingKey: key, Mandatory: true, MessageID: id})
				var re *driver.ReturnError
				switch {
				case unroutable && !errors.As(err, &re):
					t.Errorf("%s: unroutable publish returned %v", id, err)
				case unroutable && (re.Code != 312 || re.Text != "NO_ROUTE" || re.RoutingKey != key || re.Exchange != ex):
					t.Errorf("%s: return %+v does not belong to this publish", id, re)
				case !unroutable && err != nil:
					t.Errorf("%s: routable publish failed: %v", id, err)
				case !unroutable:
					routed.Add(1)
				}
			}
		})
	}
	wg.Wait()
	info, err := c.InspectQueue(ctx, q)
	if err != nil || int64(info.Messages) != routed.Load() {
		t.Fatalf("queue holds %d (%v), want %d", info.Messages, err, routed.Load())
	}
	var re *driver.ReturnError
	err = c.Publish(ctx, driver.Message{Exchange: ex, RoutingKey: "nowhere", Mandatory: true, MessageID: "last"})
	if !errors.As(err, &re) || !strings.Contains(err.Error(), "312 NO_ROUTE") {
		t.Fatalf("error text %v", err)
	}
	// Not mandatory: dropped silently, confirmed.
	if err := c.Publish(ctx, driver.Message{Exchange: ex, RoutingKey: "nowhere", MessageID: "y"}); err != nil {
		t.Fatalf("non-mandatory unroutable: %v", err)
	}
}

func TestPublishBatch(t *testing.T) {
	c := openTest(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	var ms []driver.Message
	for i := range 50 {
		key := q
		if i%5 == 4 {
			key = uniqueName("nowhere")
		}
		ms = append(ms, driver.Message{RoutingKey: key, Mandatory: true, MessageID: fmt.Sprint(i)})
	}
	errs := c.PublishBatch(ctx, ms)
	if len(errs) != len(ms) {
		t.Fatalf("%d results for %d messages", len(errs), len(ms))
	}
	for i, err := range errs {
		var re *driver.ReturnError
		if i%5 == 4 {
			if !errors.As(err, &re) || re.RoutingKey != ms[i].RoutingKey {
				t.Errorf("message %d: %v, want its own return", i, err)
			}
		} else if err != nil {
			t.Errorf("message %d: %v", i, err)
		}
	}
}

func TestNoConfirms(t *testing.T) {
	c := openTest(t, func(cfg *driver.Config) { cfg.NoConfirms = true })
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	for i := range 100 {
		if err := c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: fmt.Sprint(i)}); err != nil {
			t.Fatal(err)
		}
	}
	// Mandatory publishes are still confirmed, so returns are reported.
	var re *driver.ReturnError
	if err := c.Publish(ctx, driver.Message{RoutingKey: uniqueName("nowhere"), Mandatory: true, MessageID: "m"}); !errors.As(err, &re) {
		t.Fatalf("mandatory unroutable with confirms off: %v", err)
	}
	testenv.Eventually(t, "100 messages", func() bool {
		info, err := c.InspectQueue(ctx, q)
		return err == nil && info.Messages == 100
	})
}

func TestPublishToMissingExchange(t *testing.T) {
	c := openTest(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	missing := uniqueName("nox")
	err := c.Publish(ctx, driver.Message{Exchange: missing, RoutingKey: "k", MessageID: "a"})
	if !errors.Is(err, driver.ErrNotFound) || !strings.Contains(err.Error(), missing) {
		t.Fatalf("publish to a missing exchange: %v", err)
	}
	// The publishing channel is replaced; publishing goes on.
	for i := range 10 {
		if err := c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: fmt.Sprint(i)}); err != nil {
			t.Fatalf("publish after the channel error: %v", err)
		}
	}
}

func TestPermitTimeout(t *testing.T) {
	c := openTest(t, func(cfg *driver.Config) {
		cfg.MaxOutstanding = 3
		cfg.ConfirmTimeout = 300 * time.Millisecond
	})
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	// Three publishes "awaiting a confirm".
	for range 3 {
		c.permits.tryAcquire()
	}
	start := time.Now()
	err := c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: "x"})
	if !errors.Is(err, driver.ErrConfirmTimeout) ||
		err.Error() != "3 publishes are already waiting for a confirm and none completed within 300ms: "+driver.ErrConfirmTimeout.Error() {
		t.Fatalf("err = %v", err)
	}
	if d := time.Since(start); d < 250*time.Millisecond {
		t.Fatalf("gave up after %v, before the timeout", d)
	}
	// A completing publish frees a permit: a waiting publish proceeds.
	go func() {
		time.Sleep(100 * time.Millisecond)
		c.permits.release()
	}()
	if err := c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: "y"}); err != nil {
		t.Fatalf("publish after a permit was freed: %v", err)
	}
	c.permits.release()
	c.permits.release()
}

// With the broker's answers held back, confirms do not arrive: publishes
// time out waiting for them, the outstanding bound fills up, and further
// publishes wait for a permit and then fail with the permit message.
func TestBackPressureWithStalledConfirms(t *testing.T) {
	p := newProxy(t, nil)
	c := openTest(t, func(cfg *driver.Config) {
		cfg.URLs = []string{p.url("amqp")}
		cfg.MaxOutstanding = 4
		cfg.ConfirmTimeout = 500 * time.Millisecond
	})
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	p.pause()
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range 4 {
		wg.Go(func() { errs[i] = c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: fmt.Sprint(i)}) })
	}
	wg.Wait()
	for i, err := range errs {
		if !errors.Is(err, driver.ErrConfirmTimeout) || !strings.Contains(err.Error(), "no confirm") {
			t.Errorf("publish %d: %v", i, err)
		}
	}
	err := c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: "5"})
	if !errors.Is(err, driver.ErrConfirmTimeout) ||
		!strings.HasPrefix(err.Error(), "4 publishes are already waiting for a confirm and none completed within 500ms") {
		t.Fatalf("publish beyond the bound: %v", err)
	}
	if n := c.permits.held(); n != 4 {
		t.Fatalf("%d permits held by the stalled publishes, want 4", n)
	}
	p.unpause()
	// The late confirms free the permits. Wait for them to arrive rather
	// than assume they do within the 500 ms the next publish waits for a
	// permit; and give that publish the default confirm timeout (no publish
	// is running now): what is checked is that the permits come back, not
	// that a shared, busy broker confirms a publish within 500 ms.
	testenv.Eventually(t, "the stalled publishes' late confirms", func() bool {
		c.abMu.Lock()
		defer c.abMu.Unlock()
		for _, ab := range c.abandoned {
			select {
			case <-ab.dc.Done():
			default:
				return false
			}
		}
		return true
	})
	c.cfg.ConfirmTimeout = DefaultConfirmTimeout
	c.clock = newConfirmClock(DefaultConfirmTimeout)
	if err := c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: "6"}); err != nil {
		t.Fatalf("publish after the confirms arrived: %v", err)
	}
	testenv.Eventually(t, "permits released", func() bool { return c.permits.held() == 0 })
}

func TestPublishHonoursContext(t *testing.T) {
	c := openTest(t, nil)
	q := tempQueue(t, c, driver.Queue{})
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	if err := c.Publish(ctx, driver.Message{RoutingKey: q}); !errors.Is(err, context.Canceled) {
		t.Fatalf("publish with a cancelled context: %v", err)
	}
	if _, err := c.DeclareQueue(ctx, driver.Queue{Name: uniqueName("q")}); !errors.Is(err, context.Canceled) {
		t.Fatalf("declare with a cancelled context: %v", err)
	}
}

func TestBlockedFailsFast(t *testing.T) {
	var events []driver.Event
	var mu sync.Mutex
	c := openTest(t, func(cfg *driver.Config) {
		cfg.OnEvent = func(e driver.Event) { mu.Lock(); events = append(events, e); mu.Unlock() }
	})
	ctx := ctxFor(t, 10*time.Second)
	reason := "low on memory"
	c.blocked.Store(&reason)
	start := time.Now()
	err := c.Publish(ctx, driver.Message{RoutingKey: "x"})
	if !errors.Is(err, driver.ErrBlocked) || !strings.Contains(err.Error(), reason) || time.Since(start) > 100*time.Millisecond {
		t.Fatalf("publish while blocked: %v after %v", err, time.Since(start))
	}
	if b, r := c.Blocked(); !b || r != reason {
		t.Fatalf("Blocked() = %v, %q", b, r)
	}
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping while blocked: %v", err)
	}
	c.blocked.Store(nil)
	if b, _ := c.Blocked(); b {
		t.Fatal("still blocked")
	}
}

func TestPublishToExchangeDeletedElsewhere(t *testing.T) {
	c := openTest(t, nil)
	other := openTest(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	ex := uniqueName("x")
	if err := c.DeclareExchange(ctx, driver.Exchange{Name: ex, Kind: driver.Fanout}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteExchange(t, ex) })
	if err := c.Publish(ctx, driver.Message{Exchange: ex, MessageID: "1"}); err != nil {
		t.Fatal(err)
	}
	if err := other.DeleteExchange(ctx, ex); err != nil {
		t.Fatal(err)
	}
	err := c.Publish(ctx, driver.Message{Exchange: ex, MessageID: "2"})
	if !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("publish to an exchange deleted by another connection: %v", err)
	}
	// Known missing now: checked before publishing, without a channel error.
	if err := c.Publish(ctx, driver.Message{Exchange: ex, MessageID: "3"}); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("second publish: %v", err)
	}
	if err := c.Publish(ctx, driver.Message{Exchange: "amq.fanout", MessageID: "4"}); err != nil {
		t.Fatal(err)
	}
}

// A republish by the library keeps the delivered message's id, so two
// outstanding publishes can share a message-id; a return must still reach
// the one it belongs to (its exchange and routing key), not the older one.
func TestReturnsMatchedWhenMessageIDsRepeat(t *testing.T) {
	c := openTest(t, nil)
	ctx := ctxFor(t, 30*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	var ms []driver.Message
	for i := range 50 {
		id := fmt.Sprintf("same-%d", i)
		ms = append(ms,
			driver.Message{RoutingKey: q, Mandatory: true, MessageID: id},
			driver.Message{RoutingKey: uniqueName("nowhere"), Mandatory: true, MessageID: id})
	}
	errs := c.PublishBatch(ctx, ms)
	for i, err := range errs {
		var re *driver.ReturnError
		if i%2 == 0 && err != nil {
			t.Errorf("routable publish %d (%s) failed: %v", i, ms[i].MessageID, err)
		}
		if i%2 == 1 && (!errors.As(err, &re) || re.RoutingKey != ms[i].RoutingKey) {
			t.Errorf("unroutable publish %d (%s) returned %v", i, ms[i].MessageID, err)
		}
	}
}
