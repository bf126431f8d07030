package acemq_test

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/topology"
)

// lateScheme is a test transport: lateScheme://NAME fails its first opens
// with the error the test sets, then opens the memory broker memory://NAME.
const lateScheme = "acemq-late"

func init() { driver.Register(lateScheme, lateDriver{}) }

type lateDriver struct{}

// lateBrokers holds, per NAME, how the broker answers.
var lateBrokers sync.Map // string → *lateBroker

type lateBroker struct {
	failures int   // opens that fail before one succeeds; <0: all fail
	err      error // what a failing open returns
	opens    atomic.Int32
}

func (lateDriver) Open(ctx context.Context, cfg driver.Config) (driver.Conn, error) {
	name := strings.TrimPrefix(cfg.URLs[0], lateScheme+"://")
	v, _ := lateBrokers.Load(name)
	b := v.(*lateBroker)
	n := int(b.opens.Add(1))
	if b.failures < 0 || n <= b.failures {
		return nil, fmt.Errorf("open %d: %w", n, b.err)
	}
	cfg.URLs = []string{"memory://" + name}
	return memory.Driver{}.Open(ctx, cfg)
}

func newLateBroker(t *testing.T, failures int, err error) (string, *lateBroker) {
	t.Helper()
	name := testenv.Name(t)
	b := &lateBroker{failures: failures, err: err}
	lateBrokers.Store(name, b)
	t.Cleanup(func() { lateBrokers.Delete(name); memory.Reset(name) })
	return lateScheme + "://" + name, b
}

var errNotYet = errors.New("connection refused (test)")

func shortWaits(t *testing.T) {
	t.Cleanup(acemq.SetWaitBackoff(time.Millisecond, 4*time.Millisecond))
}

// events records connection events.
type events struct {
	mu sync.Mutex
	es []driver.Event
}

func (r *events) add(e driver.Event) { r.mu.Lock(); r.es = append(r.es, e); r.mu.Unlock() }

func (r *events) all() []driver.Event {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]driver.Event(nil), r.es...)
}

func TestWaitForBrokerRetriesUntilTheBrokerAnswers(t *testing.T) {
	shortWaits(t)
	u, b := newLateBroker(t, 3, errNotYet)
	var rec events
	var logs bytes.Buffer
	conn, err := acemq.Connect(context.Background(), u, acemq.WithWaitForBroker(),
		acemq.WithOnConnEvent(rec.add), acemq.WithLogger(slog.New(slog.NewTextHandler(&logs, nil))))
	if err != nil {
		t.Fatalf("Connect with WithWaitForBroker: %v", err)
	}
	defer conn.Close(context.Background())
	if n := b.opens.Load(); n != 4 {
		t.Errorf("the driver was opened %d times, want 4 (three failures, then the broker)", n)
	}
	es := rec.all()
	if len(es) != 4 {
		t.Fatalf("events %+v: want three retrying and one recovered", es)
	}
	for i, e := range es[:3] {
		if e.Kind != driver.EventRetrying || e.Attempt != i+1 || !errors.Is(e.Err, errNotYet) || e.Delay <= 0 {
			t.Errorf("event %d = %+v, want retrying, attempt %d, the open's error and a delay", i, e, i+1)
		}
	}
	if e := es[3]; e.Kind != driver.EventRecovered || e.Attempt != 3 {
		t.Errorf("last event = %+v, want recovered after attempt 3", e)
	}
	if got := strings.Count(logs.String(), "the broker is not reachable yet"); got != 3 {
		t.Errorf("logged %d waits, want 3:\n%s", got, logs.String())
	}
	if !strings.Contains(logs.String(), "connection refused (test)") {
		t.Errorf("the log does not carry the attempt's error:\n%s", logs.String())
	}
	// The connection works.
	if err := topology.New().Queue("q", topology.WithQueueType(topology.QueueClassic)).Apply(context.Background(), conn); err != nil {
		t.Fatal(err)
	}
}

func TestConnectWithoutWaitFailsAtOnce(t *testing.T) {
	shortWaits(t)
	u, b := newLateBroker(t, 3, errNotYet)
	var rec events
	_, err := acemq.Connect(context.Background(), u, acemq.WithOnConnEvent(rec.add))
	if !errors.Is(err, errNotYet) {
		t.Fatalf("Connect = %v, want the open's error", err)
	}
	if n := b.opens.Load(); n != 1 {
		t.Errorf("the driver was opened %d times, want 1", n)
	}
	if es := rec.all(); len(es) != 0 {
		t.Errorf("events %+v, want none", es)
	}
}

func TestWaitForBrokerStopsAtAPermanentError(t *testing.T) {
	shortWaits(t)
	refused := driver.Permanent(errors.New("403 ACCESS_REFUSED (test)"))
	u, b := newLateBroker(t, -1, refused)
	var rec events
	_, err := acemq.Connect(context.Background(), u, acemq.WithWaitForBroker(), acemq.WithOnConnEvent(rec.add))
	if !errors.Is(err, driver.ErrPermanent) || !strings.Contains(err.Error(), "ACCESS_REFUSED") {
		t.Fatalf("Connect = %v, want the permanent error", err)
	}
	if n := b.opens.Load(); n != 1 {
		t.Errorf("the driver was opened %d times, want 1: a permanent error is not retried", n)
	}
	if es := rec.all(); len(es) != 0 {
		t.Errorf("events %+v, want none", es)
	}
}

func TestWaitForBrokerEndsWithTheContext(t *testing.T) {
	shortWaits(t)
	u, b := newLateBroker(t, -1, errNotYet)
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	var rec events
	_, err := acemq.Connect(ctx, u, acemq.WithWaitForBroker(), acemq.WithOnConnEvent(func(e driver.Event) {
		rec.add(e)
		if e.Attempt == 3 {
			cancel()
		}
	}))
	if !errors.Is(err, context.Canceled) || !errors.Is(err, errNotYet) {
		t.Fatalf("Connect = %v, want an error wrapping context.Canceled and the last open's error", err)
	}
	if !strings.Contains(err.Error(), "open 3:") {
		t.Errorf("Connect = %v, want the last attempt's error (open 3)", err)
	}
	if n := b.opens.Load(); n != 3 {
		t.Errorf("the driver was opened %d times, want 3: none after the context ended", n)
	}
}

func TestWaitBackoff(t *testing.T) {
	for n := 1; n <= 12; n++ {
		want := min(time.Second<<(n-1), 30*time.Second)
		for range 50 {
			d := acemq.WaitBackoff(n)
			if d < want*8/10 || d > min(want*12/10, 30*time.Second) {
				t.Fatalf("WaitBackoff(%d) = %s, want %s ±20 %%, at most 30s", n, d, want)
			}
		}
	}
}

// TestWaitForBrokerRabbitMQ starts a service before its broker: the URL
// points at a port where nothing listens until the test has seen the first
// retry; then a proxy to the test broker starts listening there.
func TestWaitForBrokerRabbitMQ(t *testing.T) {
	shortWaits(t)
	base, err := url.Parse(testenv.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	backend := base.Host
	if base.Port() == "" {
		backend = net.JoinHostPort(base.Hostname(), "5672")
	}
	addr := testenv.FreeAddr(t)
	through := *base
	through.Host = addr
	started := make(chan struct{})
	var once sync.Once
	var rec events
	var fw testenv.Forwarder
	defer fw.Close()
	conn, err := acemq.Connect(t.Context(), through.String(), acemq.WithWaitForBroker(), acemq.WithOnConnEvent(func(e driver.Event) {
		rec.add(e)
		if e.Kind == driver.EventRetrying {
			once.Do(func() {
				fw.Start(t, addr, backend)
				close(started)
			})
		}
	}))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	<-started
	if h := conn.Health(t.Context()); h.Status != acemq.HealthUp {
		t.Errorf("health after connecting: %+v", h)
	}
	if err := conn.Close(context.Background()); err != nil {
		t.Error(err)
	}
	es := rec.all()
	if len(es) < 2 || es[0].Kind != driver.EventRetrying || es[len(es)-1].Kind != driver.EventRecovered {
		t.Fatalf("events %+v: want retrying first and recovered last", es)
	}
	var op *net.OpError
	if !errors.As(es[0].Err, &op) {
		t.Errorf("the first retry's error %v is not the refused dial", es[0].Err)
	}
}

// TestWaitForBrokerRabbitMQCancelled: nothing ever listens; cancelling
// the context ends the wait with an error wrapping context.Canceled and
// the refused dial.
func TestWaitForBrokerRabbitMQCancelled(t *testing.T) {
	shortWaits(t)
	base, err := url.Parse(testenv.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	base.Host = testenv.FreeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	_, err = acemq.Connect(ctx, base.String(), acemq.WithWaitForBroker(), acemq.WithOnConnEvent(func(e driver.Event) {
		if e.Attempt == 2 {
			cancel()
		}
	}))
	var op *net.OpError
	if !errors.Is(err, context.Canceled) || !errors.As(err, &op) {
		t.Fatalf("Connect = %v, want an error wrapping context.Canceled and the refused dial", err)
	}
}

// TestWaitForBrokerRabbitMQBadPassword: a login the broker refuses is not
// retried.
func TestWaitForBrokerRabbitMQBadPassword(t *testing.T) {
	shortWaits(t)
	base, err := url.Parse(testenv.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	base.User = url.UserPassword(base.User.Username(), "wrong-"+testenv.Name(t))
	var rec events
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	_, err = acemq.Connect(ctx, base.String(), acemq.WithWaitForBroker(), acemq.WithOnConnEvent(rec.add))
	if !errors.Is(err, driver.ErrPermanent) {
		t.Fatalf("Connect = %v, want a permanent error", err)
	}
	if es := rec.all(); len(es) != 0 {
		t.Errorf("events %+v: a refused login must not be retried", es)
	}
}

// TestWaitForBrokerRabbitMQClusterNotAllPermanent: with two URLs, one
// refusing the login and one where nothing listens yet, the wait goes on:
// only a round where every node failed permanently ends it.
func TestWaitForBrokerRabbitMQClusterNotAllPermanent(t *testing.T) {
	shortWaits(t)
	base, err := url.Parse(testenv.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	bad := *base
	bad.User = url.UserPassword(base.User.Username(), "wrong-"+testenv.Name(t))
	down := bad
	down.Host = testenv.FreeAddr(t)
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var rec events
	_, err = acemq.Connect(ctx, bad.String()+","+down.String(), acemq.WithWaitForBroker(), acemq.WithOnConnEvent(func(e driver.Event) {
		rec.add(e)
		cancel()
	}))
	if !errors.Is(err, context.Canceled) || errors.Is(err, driver.ErrPermanent) {
		t.Fatalf("Connect = %v, want the wait to go on until the context ends", err)
	}
	if es := rec.all(); len(es) != 1 || es[0].Kind != driver.EventRetrying {
		t.Errorf("events %+v, want one retrying", es)
	}
}

// TestWaitForBrokerRabbitMQCluster: with a list of two nodes, neither up,
// the wait dials both each attempt and connects to the one that comes up.
func TestWaitForBrokerRabbitMQCluster(t *testing.T) {
	shortWaits(t)
	base, err := url.Parse(testenv.AMQPURL(t))
	if err != nil {
		t.Fatal(err)
	}
	backend := base.Host
	if base.Port() == "" {
		backend = net.JoinHostPort(base.Hostname(), "5672")
	}
	dead, late := *base, *base
	dead.Host, late.Host = testenv.FreeAddr(t), testenv.FreeAddr(t)
	var fw testenv.Forwarder
	defer fw.Close()
	var once sync.Once
	var rec events
	conn, err := acemq.Connect(t.Context(), dead.String()+","+late.String(), acemq.WithWaitForBroker(), acemq.WithOnConnEvent(func(e driver.Event) {
		rec.add(e)
		once.Do(func() { fw.Start(t, late.Host, backend) })
	}))
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	defer conn.Close(context.Background())
	if ep := conn.Endpoint(); !strings.Contains(ep, late.Host) {
		t.Errorf("connected to %q, want the node that came up (%s)", ep, late.Host)
	}
	es := rec.all()
	if first := es[0]; first.Kind != driver.EventRetrying || !strings.Contains(first.Err.Error(), dead.Host) || !strings.Contains(first.Err.Error(), late.Host) {
		t.Errorf("the first retry's error %v does not name both nodes", first.Err)
	}
	if last := es[len(es)-1]; last.Kind != driver.EventRecovered || !strings.Contains(last.Endpoint, late.Host) {
		t.Errorf("the last event %+v is not recovered on %s", last, late.Host)
	}
}
