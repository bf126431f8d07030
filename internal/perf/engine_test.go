package perf

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
)

// A driver with no broker behind it: Publish returns at once and a
// subscription hands out one prepared delivery as fast as it is taken. It
// measures what the acemq package itself costs per message, without the
// network, amqp091 or RabbitMQ, so the numbers are steady enough to guide
// optimisation on a busy machine.
type nullDriver struct{}

func (nullDriver) Open(context.Context, driver.Config) (driver.Conn, error) {
	return &nullConn{}, nil
}

type nullConn struct {
	driver.Conn // methods the benchmarks do not reach panic
	delivery    driver.Delivery
	mu          sync.Mutex
	subs        []*nullSub
}

func (c *nullConn) Publish(context.Context, driver.Message) error { return nil }

func (c *nullConn) PublishBatch(_ context.Context, ms []driver.Message) []error {
	return make([]error, len(ms))
}

func (c *nullConn) Capabilities() driver.Capabilities { return driver.Capabilities{} }
func (c *nullConn) Blocked() (bool, string)           { return false, "" }
func (c *nullConn) Close() error                      { return nil }

func (c *nullConn) Consume(_ context.Context, spec driver.ConsumeSpec) (driver.Subscription, error) {
	s := &nullSub{out: make(chan driver.Delivery), stop: make(chan struct{}), tag: spec.Tag}
	c.mu.Lock()
	c.subs = append(c.subs, s)
	c.mu.Unlock()
	d := c.delivery
	d.Acknowledger = nullAcker{}
	go func() {
		defer close(s.out)
		for {
			select {
			case s.out <- d:
			case <-s.stop:
				return
			}
		}
	}()
	return s, nil
}

type nullSub struct {
	out  chan driver.Delivery
	stop chan struct{}
	once sync.Once
	tag  string
}

func (s *nullSub) Deliveries() <-chan driver.Delivery { return s.out }
func (s *nullSub) Tag() string                        { return s.tag }
func (s *nullSub) Cancel(context.Context) error       { s.once.Do(func() { close(s.stop) }); return nil }
func (s *nullSub) Close() error                       { return s.Cancel(context.Background()) }

type nullAcker struct{}

func (nullAcker) Ack(uint64) error          { return nil }
func (nullAcker) Nack(uint64, bool) error   { return nil }
func (nullAcker) Reject(uint64, bool) error { return nil }

func init() { driver.Register("perfnull", nullDriver{}) }

// BenchmarkEngine measures the acemq package's own cost per message on the
// null driver: Send (envelope built per message), SendAll in batches of
// 1,000, and a consumer at concurrency 1 and 8 reading a 256-byte JSON
// body with a full envelope and accepting it.
func BenchmarkEngine(b *testing.B) {
	ctx := context.Background()
	newConn := func(b *testing.B) *acemq.Conn {
		c, err := acemq.Connect(ctx, "perfnull://bench")
		if err != nil {
			b.Fatal(err)
		}
		b.Cleanup(func() { _ = c.Close(ctx) })
		return c
	}
	b.Run("Send", func(b *testing.B) {
		p := acemq.NewPublisher[Order](newConn(b), "")
		order := NewOrderCached()
		b.ReportAllocs()
		for b.Loop() {
			if _, err := p.Send(ctx, "orders", order, acemq.WithEnvelope(newFullEnvelope())); err != nil {
				b.Fatal(err)
			}
		}
	})
	b.Run("SendAll", func(b *testing.B) {
		p := acemq.NewPublisher[Order](newConn(b), "")
		batch := make([]acemq.Outgoing[Order], window)
		b.ReportAllocs()
		for b.Loop() {
			for i := range batch {
				batch[i] = acemq.Outgoing[Order]{RoutingKey: "orders", Payload: NewOrderCached(), Envelope: newFullEnvelope()}
			}
			if _, err := p.SendAll(ctx, batch); err != nil {
				b.Fatal(err)
			}
		}
		b.ReportMetric(float64(b.Elapsed().Nanoseconds())/float64(b.N*window), "ns/msg")
	})
	for _, conc := range []int{1, 8} {
		name := "Consume/c1"
		if conc == 8 {
			name = "Consume/c8"
		}
		b.Run(name, func(b *testing.B) {
			c := newConn(b)
			nc := brokertest.DriverAs[*nullConn](c)
			nc.delivery = driver.Delivery{
				RoutingKey: "orders", ContentType: "application/json", MessageID: "m-1",
				Persistent: true, Headers: newFullEnvelope().AppendHeaders(nil, "orders"),
				Body: orderJSONBody, ConsumerTag: "bench", DeliveryTag: 1,
			}
			var left atomic.Int64
			left.Store(int64(b.N))
			done := make(chan struct{})
			b.ReportAllocs()
			b.ResetTimer()
			cpu0 := cpuClock()
			cons, err := acemq.Consume(ctx, c, "orders", func(_ context.Context, m acemq.Message[Order]) acemq.Ack {
				if left.Add(-1) == 0 {
					close(done)
				}
				return acemq.Accept()
			}, acemq.WithConcurrency(conc), acemq.WithDeclarations(false))
			if err != nil {
				b.Fatal(err)
			}
			select {
			case <-done:
			case <-time.After(5 * time.Minute):
				b.Fatal("the consumer stalled")
			}
			b.StopTimer()
			b.ReportMetric(float64((cpuClock()-cpu0).Nanoseconds())/float64(b.N), "cpu-ns/msg")
			_ = cons.Close(ctx)
		})
	}
}

var orderJSONBody, _ = acemq.JSON.Encode(NewOrder())
