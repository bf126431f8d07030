package topology_test

import (
	"context"
	"testing"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/topology"
)

// lender is a topology.Conn that is not an *acemq.Conn: it lends a memory
// driver connection, as a tool holding only a driver connection would.
type lender struct{ c driver.Conn }

func (l lender) Raw(f func(driver.Conn) error) error { return f(l.c) }

func (l lender) String() string { return "a lender" }

// Apply, Drift and Delete need only Raw: with a connection that is not an
// *acemq.Conn (no logger, no retry policies to remember), they declare,
// check and delete as with one.
func TestApplyOnAnyConn(t *testing.T) {
	ctx := context.Background()
	name := testenv.Name(t)
	dc, err := memory.Driver{}.Open(ctx, driver.Config{URLs: []string{"memory://" + name}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = dc.Close(); memory.Reset(name) })
	c := lender{dc}
	topo := topology.New().
		Exchange("orders", topology.ExchangeTopic).
		Queue("orders.new").
		Bind("orders", "orders.new", "order.*")
	if err := topo.Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	drift, err := topo.Drift(ctx, c)
	if err != nil || len(drift) != 0 {
		t.Fatalf("Drift after Apply = %v, %v; want nothing", drift, err)
	}
	if err := topo.Delete(ctx, c); err != nil {
		t.Fatal(err)
	}
	drift, err = topo.Drift(ctx, c)
	if err != nil {
		t.Fatal(err)
	}
	missing := map[string]bool{}
	for _, d := range drift {
		if d.Kind == topology.DriftMissing {
			missing[d.Declaration.Name()] = true
		}
	}
	for _, n := range []string{"orders", "orders.new", "orders.new.dlq", "orders.new.parked"} {
		if !missing[n] {
			t.Errorf("after Delete, %s is not missing: %v", n, drift)
		}
	}
}
