package memory

import (
	"context"
	"testing"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/driver/drivertest"
)

func TestConformance(t *testing.T) {
	url := newURL(t)
	drivertest.RunConformance(t, func(t *testing.T) driver.Conn {
		return dial(t, url)
	})
}

// TestConformanceCoreOnly runs the suite over connections that show only
// the six methods of driver.Conn, and subscriptions that show only those
// of driver.Subscription: the core tests must pass with nothing more, and
// the tests of the optional interfaces must pass (without running) too.
func TestConformanceCoreOnly(t *testing.T) {
	var c driver.Conn = coreConn{}
	for name, hidden := range map[string]bool{
		"driver.Inspector":          implements[driver.Inspector](c),
		"driver.Deleter":            implements[driver.Deleter](c),
		"driver.Getter":             implements[driver.Getter](c),
		"driver.BatchPublisher":     implements[driver.BatchPublisher](c),
		"driver.EachPublisher":      implements[driver.EachPublisher](c),
		"driver.Pinger":             implements[driver.Pinger](c),
		"driver.BlockReporter":      implements[driver.BlockReporter](c),
		"driver.CapabilityReporter": implements[driver.CapabilityReporter](c),
		"driver.Unbinder":           implements[driver.Unbinder](c),
		"driver.Receiver":           implements[driver.Receiver](coreSub{}),
	} {
		if hidden {
			t.Fatalf("the core-only wrapper implements %s", name)
		}
	}
	url := newURL(t)
	drivertest.RunConformance(t, func(t *testing.T) driver.Conn {
		return coreConn{c: dial(t, url)}
	})
}

func implements[T any](v any) bool {
	_, ok := v.(T)
	return ok
}

// coreConn forwards the methods of driver.Conn, and nothing else, to a
// memory connection.
type coreConn struct{ c *conn }

func (w coreConn) DeclareExchange(ctx context.Context, e driver.Exchange) error {
	return w.c.DeclareExchange(ctx, e)
}

func (w coreConn) DeclareQueue(ctx context.Context, q driver.Queue) (driver.QueueInfo, error) {
	return w.c.DeclareQueue(ctx, q)
}

func (w coreConn) Bind(ctx context.Context, b driver.Binding) error { return w.c.Bind(ctx, b) }

func (w coreConn) Publish(ctx context.Context, m driver.Message) error { return w.c.Publish(ctx, m) }

func (w coreConn) Consume(ctx context.Context, spec driver.ConsumeSpec) (driver.Subscription, error) {
	s, err := w.c.Consume(ctx, spec)
	if err != nil {
		return nil, err
	}
	return coreSub{s: s}, nil
}

func (w coreConn) Close() error { return w.c.Close() }

// coreSub forwards the methods of driver.Subscription, and nothing else
// (not driver.Receiver), to a memory subscription.
type coreSub struct{ s driver.Subscription }

func (w coreSub) Deliveries() <-chan driver.Delivery { return w.s.Deliveries() }

func (w coreSub) Tag() string { return w.s.Tag() }

func (w coreSub) Cancel(ctx context.Context) error { return w.s.Cancel(ctx) }

func (w coreSub) Close() error { return w.s.Close() }
