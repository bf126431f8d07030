package acemq_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"go.opentelemetry.io/otel/codes"
)

// fakeScheme is a driver wrapping the memory broker whose blocked state,
// publishes and pings a test controls.
const fakeScheme = "acemqtelfake"

func init() { driver.Register(fakeScheme, fakeDriver{}) }

type fakeDriver struct{}

func (fakeDriver) Open(ctx context.Context, cfg driver.Config) (driver.Conn, error) {
	mcfg := cfg
	mcfg.URLs = []string{"memory://" + strings.TrimPrefix(cfg.URLs[0], fakeScheme+"://")}
	mcfg.OnEvent = nil
	d, err := driver.Lookup(mcfg.URLs[0])
	if err != nil {
		return nil, err
	}
	inner, err := d.Open(ctx, mcfg)
	if err != nil {
		return nil, err
	}
	return &fakeConn{FullConn: inner.(brokertest.FullConn), onEvent: cfg.OnEvent}, nil
}

type fakeConn struct {
	brokertest.FullConn
	onEvent func(driver.Event)

	mu       sync.Mutex
	blocked  string // the reason, when blocked
	pingErr  error
	pingHang bool
	pings    atomic.Int32
	deadline atomic.Bool // a ping's ctx had a deadline
}

func (f *fakeConn) block(reason string) {
	f.mu.Lock()
	f.blocked = reason
	f.mu.Unlock()
	f.onEvent(driver.Event{Kind: driver.EventBlocked, Reason: reason})
}

func (f *fakeConn) Blocked() (bool, string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.blocked != "", f.blocked
}

func (f *fakeConn) Publish(ctx context.Context, m driver.Message) error {
	if b, reason := f.Blocked(); b {
		return fmt.Errorf("%w: %s", driver.ErrBlocked, reason)
	}
	return f.FullConn.Publish(ctx, m)
}

func (f *fakeConn) Ping(ctx context.Context) error {
	f.pings.Add(1)
	_, ok := ctx.Deadline()
	f.deadline.Store(ok)
	f.mu.Lock()
	err, hang := f.pingErr, f.pingHang
	f.mu.Unlock()
	if hang {
		<-ctx.Done()
		return ctx.Err()
	}
	if err != nil {
		return err
	}
	return f.FullConn.Ping(ctx)
}

func fakeConnect(t *testing.T, opts ...acemq.ConnOption) (*acemq.Conn, *fakeConn) {
	t.Helper()
	c, err := acemq.Connect(context.Background(), fakeScheme+"://"+testenv.Name(t), opts...)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	return c, brokertest.Driver(c).(*fakeConn)
}

func TestTelemetryRefusedPublish(t *testing.T) {
	x := newTel(t)
	c, f := fakeConnect(t, x.options()...)
	f.block("low on memory")
	ctx, app := x.tp.Tracer("test").Start(context.Background(), "app")
	_, err := acemq.NewPublisher[string](c, "").Send(ctx, "orders", "o-1")
	app.End()
	if !errors.Is(err, acemq.ErrBlocked) {
		t.Fatalf("Send on a blocked connection: %v, want ErrBlocked", err)
	}
	spans := x.ended("orders publish")
	if len(spans) != 1 || !isChildOf(spans[0], app.SpanContext()) {
		t.Fatalf("%d publish spans", len(spans))
	}
	wantAttr(t, spans[0], "messaging.acemq.outcome", "refused")
	if spans[0].Status().Code != codes.Error {
		t.Errorf("refused publish span status %v, want error", spans[0].Status())
	}
	if _, ok := spanEvent(spans[0], "exception"); !ok {
		t.Errorf("the refusal is not recorded on the span")
	}
	if got := x.count(t, "acemq.publish.total", map[string]string{"exchange": "", "routing.key": "orders", "outcome": "refused"}); got != 1 {
		t.Errorf("acemq.publish.total refused = %d, want 1 (series %v)", got, x.series(t, "acemq.publish.total"))
	}
	if got := x.count(t, "acemq.connection.events", map[string]string{"event": "blocked"}); got != 1 {
		t.Errorf("acemq.connection.events{event=blocked} = %d, want 1", got)
	}
}

func TestTelemetryPublishedWithoutConfirms(t *testing.T) {
	x := newTel(t)
	c, _ := fakeConnect(t, append(x.options(), acemq.WithConfirms(false))...)
	if _, err := brokertest.Driver(c).DeclareQueue(context.Background(), driver.Queue{Name: "q", Durable: true}); err != nil {
		t.Fatal(err)
	}
	if _, err := acemq.NewPublisher[string](c, "").Send(context.Background(), "q", "x"); err != nil {
		t.Fatal(err)
	}
	if got := x.count(t, "acemq.publish.total", map[string]string{"exchange": "", "routing.key": "q", "outcome": "published"}); got != 1 {
		t.Errorf("an unconfirmed publish: series %v, want outcome published", x.series(t, "acemq.publish.total"))
	}
}

func TestHealthBlockedIsUpWithoutProbe(t *testing.T) {
	c, f := fakeConnect(t)
	f.block("low on memory")
	r := c.Health(context.Background())
	if r.Status != acemq.HealthUp {
		t.Errorf("status %s, want up", r.Status)
	}
	if want := "the broker has blocked this connection; publishing is paused: low on memory"; r.Detail != want {
		t.Errorf("detail %q, want %q", r.Detail, want)
	}
	if f.pings.Load() != 0 {
		t.Errorf("the broker was pinged while blocked")
	}
	if r.Parts["blocked"] != true || r.Parts["blockedReason"] != "low on memory" || r.Parts["roundTripMillis"] != nil {
		t.Errorf("parts %v", r.Parts)
	}
}

func TestHealthDown(t *testing.T) {
	t.Run("ping fails", func(t *testing.T) {
		c, f := fakeConnect(t)
		f.mu.Lock()
		f.pingErr = errors.New("connection reset by peer")
		f.mu.Unlock()
		r := c.Health(context.Background())
		if r.Status != acemq.HealthDown || !strings.Contains(r.Detail, "connection reset by peer") {
			t.Errorf("report %+v", r)
		}
	})
	t.Run("ping hangs", func(t *testing.T) {
		c, f := fakeConnect(t)
		f.mu.Lock()
		f.pingHang = true
		f.mu.Unlock()
		ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
		defer cancel()
		if r := c.Health(ctx); r.Status != acemq.HealthDown {
			t.Errorf("report %+v", r)
		}
	})
	t.Run("closed", func(t *testing.T) {
		c, _ := fakeConnect(t)
		_ = c.Close(context.Background())
		if r := c.Health(context.Background()); r.Status != acemq.HealthDown || r.Detail != "the connection is closed" {
			t.Errorf("report %+v", r)
		}
	})
}

func TestHealthDefaultDeadline(t *testing.T) {
	c, f := fakeConnect(t)
	if r := c.Health(context.Background()); r.Status != acemq.HealthUp {
		t.Fatalf("report %+v", r)
	}
	if !f.deadline.Load() {
		t.Errorf("Health pinged without a deadline from a context that had none")
	}
}

func TestHealthConsumers(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newTelRig(t, url)
		r.consume(func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() })
		rep := r.c.Health(context.Background())
		if rep.Status != acemq.HealthUp || rep.Parts["consumers"] != 1 || rep.Parts["blocked"] != false {
			t.Fatalf("report %+v", rep)
		}
		if ms, ok := rep.Parts["roundTripMillis"].(float64); !ok || ms < 0 {
			t.Errorf("roundTripMillis %v", rep.Parts["roundTripMillis"])
		}
		// Deleting the queue ends the subscription: the consumer stopped
		// without Close, so the connection is degraded.
		if _, err := brokertest.Driver(r.c).DeleteQueue(context.Background(), r.q); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "a degraded report", func() bool {
			rep = r.c.Health(context.Background())
			return rep.Status == acemq.HealthDegraded
		})
		if !strings.Contains(rep.Detail, fmt.Sprintf("%q", r.q)) || rep.Parts["consumers"] != 0 {
			t.Errorf("report %+v", rep)
		}
	})
}

func TestHealthReportJSON(t *testing.T) {
	c, _ := fakeConnect(t)
	b, err := json.Marshal(c.Health(context.Background()))
	if err != nil {
		t.Fatal(err)
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		t.Fatal(err)
	}
	for _, k := range []string{"status", "detail", "checked", "parts"} {
		if _, ok := m[k]; !ok {
			t.Errorf("the report JSON %s has no %q", b, k)
		}
	}
	if len(m) != 4 {
		t.Errorf("the report JSON has extra keys: %s", b)
	}
	parts, _ := m["parts"].(map[string]any)
	for _, k := range []string{"blocked", "blockedReason", "consumers", "roundTripMillis"} {
		if _, ok := parts[k]; !ok {
			t.Errorf("parts lack %q: %s", k, b)
		}
	}
}
