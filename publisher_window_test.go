package acemq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/memory"
)

// TestSendAllLargerThanMaxOutstanding: a batch of more messages than the
// connection lets await a confirm (WithMaxOutstanding) is sent whole, the
// window sliding inside the one call; before, the batch waited for a
// permit only its own, not yet awaited, confirms could give back, and
// failed after the confirm timeout (10 s).
func TestSendAllLargerThanMaxOutstanding(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url, acemq.WithMaxOutstanding(4))
		q := brokertest.Queue(t, c, "window")
		p := acemq.NewPublisher[string](c, "")
		batch := make([]acemq.Outgoing[string], 50)
		for i := range batch {
			batch[i] = acemq.Outgoing[string]{RoutingKey: q, Payload: "m"}
		}
		// Well within the confirm timeout: a batch stuck on its permits
		// fails here.
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		rs, err := p.SendAll(ctx, batch)
		if err != nil {
			t.Fatalf("SendAll of %d with 4 outstanding: %v", len(batch), err)
		}
		for i, r := range rs {
			if r.Err != nil || r.Envelope.ID() == "" {
				t.Fatalf("message %d: %+v", i, r)
			}
		}
		testenv.Eventually(t, "50 messages on the queue", func() bool { return brokertest.Depth(t, c, q) == len(batch) })
		// And the permits are all given back: a second batch goes too.
		if _, err := p.SendAll(ctx, batch[:10]); err != nil {
			t.Fatalf("the next SendAll: %v", err)
		}
	})
}

// TestSendAllFailuresStayAlone: in one SendAll, a payload that cannot be
// encoded, one a publish interceptor refuses and one nothing routes each
// fail alone, with their own errors in their own results; the others are
// published, in order. On RabbitMQ each message is encoded just before it
// is published (driver.EachPublisher); the results are the same.
func TestSendAllFailuresStayAlone(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		refuse := errors.New("not this one")
		c := brokertest.Connect(t, url, acemq.WithPublishInterceptors(func(_ context.Context, p *acemq.Publishing) error {
			if string(p.Body) == `"refused"` {
				return refuse
			}
			return nil
		}))
		q := brokertest.Queue(t, c, "alone")
		p := acemq.NewPublisher[any](c, "")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		rs, err := p.SendAll(ctx, []acemq.Outgoing[any]{
			{RoutingKey: q, Payload: "first"},
			{RoutingKey: q, Payload: make(chan int)},
			{RoutingKey: q, Payload: "refused"},
			{RoutingKey: q + "-nobody", Payload: "unroutable"},
			{RoutingKey: q, Payload: "last"},
		})
		var be *acemq.BatchError
		if !errors.As(err, &be) || be.Failed != 3 || be.Confirmed != 2 {
			t.Fatalf("SendAll: %v", err)
		}
		var ue *driver.ReturnError
		switch {
		case rs[0].Err != nil || rs[4].Err != nil:
			t.Errorf("the good messages failed: %v, %v", rs[0].Err, rs[4].Err)
		case rs[1].Err == nil || !strings.Contains(rs[1].Err.Error(), "cannot encode"):
			t.Errorf("the unencodable payload: %v", rs[1].Err)
		case !errors.Is(rs[2].Err, refuse):
			t.Errorf("the refused message: %v", rs[2].Err)
		case !errors.As(rs[3].Err, &ue):
			t.Errorf("the unroutable message: %v", rs[3].Err)
		}
		for _, w := range []struct {
			i    int
			body string
		}{{0, `"first"`}, {4, `"last"`}} {
			i, want := w.i, w.body
			d := brokertest.Get(t, c, q)
			if string(d.Body) != want || d.MessageID != rs[i].Envelope.ID() {
				t.Errorf("message %d on the queue: %s (id %s), want %s (id %s)", i, d.Body, d.MessageID, want, rs[i].Envelope.ID())
			}
		}
	})
}

// coreOnlyDriver opens memory connections that show only driver.Conn, as a
// driver with no optional interfaces would: SendAll then encodes the whole
// batch first and publishes it one goroutine a message.
type coreOnlyDriver struct{}

type coreOnlyConn struct{ driver.Conn }

func (coreOnlyDriver) Open(ctx context.Context, cfg driver.Config) (driver.Conn, error) {
	cfg.URLs = []string{strings.Replace(cfg.URLs[0], "coreonly://", "memory://", 1)}
	c, err := memory.Driver{}.Open(ctx, cfg)
	if err != nil {
		return nil, err
	}
	return coreOnlyConn{c}, nil
}

func init() { driver.Register("coreonly", coreOnlyDriver{}) }

// TestSendAllOnACoreOnlyDriver: on a driver with neither
// driver.EachPublisher nor driver.BatchPublisher, SendAll's results are
// the same as on the built-in drivers: a message that cannot be built
// fails alone, at its own index, and the others are published (at once,
// one goroutine each, so in no particular order).
func TestSendAllOnACoreOnlyDriver(t *testing.T) {
	url := brokertest.MemoryURL(t)
	c := brokertest.Connect(t, strings.Replace(url, "memory://", "coreonly://", 1))
	if err := c.Raw(func(dc driver.Conn) error {
		if _, ok := dc.(driver.BatchPublisher); ok {
			t.Fatal("the core-only driver implements driver.BatchPublisher")
		}
		_, err := dc.DeclareQueue(context.Background(), driver.Queue{Name: "q", Durable: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p := acemq.NewPublisher[any](c, "")
	rs, err := p.SendAll(context.Background(), []acemq.Outgoing[any]{
		{RoutingKey: "q", Payload: "first"},
		{RoutingKey: "q", Payload: make(chan int)},
		{RoutingKey: "q-nobody", Payload: "unroutable"},
		{RoutingKey: "q", Payload: "last"},
	})
	var be *acemq.BatchError
	var ue *driver.ReturnError
	switch {
	case !errors.As(err, &be) || be.Failed != 2 || be.Confirmed != 2:
		t.Fatalf("SendAll: %v", err)
	case rs[0].Err != nil || rs[3].Err != nil:
		t.Fatalf("the good messages failed: %v, %v", rs[0].Err, rs[3].Err)
	case rs[1].Err == nil || !strings.Contains(rs[1].Err.Error(), "cannot encode"):
		t.Fatalf("the unencodable payload: %v", rs[1].Err)
	case !errors.As(rs[2].Err, &ue):
		t.Fatalf("the unroutable message: %v", rs[2].Err)
	}
	// The same broker through the full memory driver, to read the queue.
	reader := brokertest.Connect(t, url)
	want := map[string]bool{rs[0].Envelope.ID(): true, rs[3].Envelope.ID(): true}
	for range 2 {
		d := brokertest.Get(t, reader, "q")
		if !want[d.MessageID] {
			t.Errorf("the queue holds %s (%s), which is not message 0 or 3", d.MessageID, d.Body)
		}
		delete(want, d.MessageID)
	}
}
