package topology_test

import (
	"context"
	"errors"
	"testing"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/topology"
)

// conn is a driver.Conn that knows a set of queues and exchanges and
// refuses to redeclare the queue named "other".
type conn struct {
	driver.Conn // nil: only what Check calls is implemented
	exist       map[string]bool
	declared    []string
}

type inspectingConn struct{ *conn }

func (c inspectingConn) InspectQueue(_ context.Context, name string) (driver.QueueInfo, error) {
	if !c.exist[name] {
		return driver.QueueInfo{}, driver.ErrNotFound
	}
	return driver.QueueInfo{Name: name}, nil
}

func (c inspectingConn) InspectExchange(_ context.Context, name string) error {
	if !c.exist[name] {
		return driver.ErrNotFound
	}
	return nil
}

func (c inspectingConn) DeclareQueue(_ context.Context, q driver.Queue) (driver.QueueInfo, error) {
	c.declared = append(c.declared, q.Name)
	if q.Name == "other" {
		return driver.QueueInfo{}, &driver.PreconditionError{Detail: "inequivalent arg 'x-queue-type'"}
	}
	return driver.QueueInfo{Name: q.Name}, nil
}

func (c inspectingConn) DeclareExchange(_ context.Context, e driver.Exchange) error {
	c.declared = append(c.declared, e.Name)
	return nil
}

func plan() topology.Plan {
	return topology.Plan{
		{Kind: topology.ExchangeDeclaration, Exchange: driver.Exchange{Name: "orders", Kind: driver.Topic, Durable: true}},
		{Kind: topology.QueueDeclaration, Queue: driver.Queue{Name: "orders.new", Durable: true, Args: driver.Table{"x-queue-type": "quorum"}}},
		{Kind: topology.QueueDeclaration, Queue: driver.Queue{Name: "other", Durable: true}},
		{Kind: topology.BindingDeclaration, Binding: driver.Binding{Exchange: "orders", Queue: "orders.new", RoutingKey: "order.*"}},
	}
}

func TestPlanString(t *testing.T) {
	const want = "exchange orders (topic, durable)\n" +
		"queue orders.new (quorum, durable)\n" +
		"queue other (classic, durable)\n" +
		"binding orders -> orders.new on \"order.*\"\n"
	if got := plan().String(); got != want {
		t.Errorf("Plan.String() =\n%s\nwant\n%s", got, want)
	}
}

func TestCheck(t *testing.T) {
	ctx := context.Background()
	c := inspectingConn{&conn{exist: map[string]bool{"orders": true, "other": true}}}
	drift, err := topology.Check(ctx, c, plan())
	if err != nil {
		t.Fatal(err)
	}
	if len(drift) != 1 || drift[0].Kind != topology.DriftMissing || drift[0].Declaration.Name() != "orders.new" {
		t.Fatalf("Check = %v, want orders.new missing", drift)
	}
	if len(c.declared) != 0 {
		t.Fatalf("a passive Check declared %v", c.declared)
	}
	drift, err = topology.Check(ctx, c, plan(), topology.WithSettingsProbe())
	if err != nil {
		t.Fatal(err)
	}
	if len(drift) != 2 || drift[1].Kind != topology.DriftDifferent || drift[1].Detail != "inequivalent arg 'x-queue-type'" {
		t.Fatalf("Check with the probe = %v, want orders.new missing and other different", drift)
	}
	if got, want := drift[1].String(), "different: queue other (classic, durable): inequivalent arg 'x-queue-type'"; got != want {
		t.Errorf("Drift.String() = %q, want %q", got, want)
	}
}

func TestCheckNeedsAnInspector(t *testing.T) {
	_, err := topology.Check(context.Background(), &conn{}, plan())
	if !errors.Is(err, errors.ErrUnsupported) {
		t.Fatalf("Check on a driver without passive checks = %v, want errors.ErrUnsupported", err)
	}
}
