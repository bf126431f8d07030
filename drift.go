package acemq

import (
	"context"
	"fmt"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/topology"
)

// Drift reports how the broker differs from the topology, without changing
// anything (unless WithSettingsProbe).
//
// By default it uses passive checks only, which create nothing and can only
// tell existence: the result lists the exchanges and queues that are
// missing (DriftMissing: what Apply would create) and those it could not
// check (DriftUnchecked). Settings cannot be read over AMQP 0-9-1, and
// comparing argument tables would be wrong anyway (RabbitMQ 4 reports an
// x-queue-type on every queue, including ones declared without it); with
// WithSettingsProbe the broker itself judges equivalence. Bindings are
// never checked: AMQP 0-9-1 has no way to ask for one, and Apply declares
// them all (which is idempotent).
//
// An empty result means every exchange and queue exists (and, with
// WithSettingsProbe, has equivalent settings). It needs a driver with
// passive checks (driver.Inspector).
func (t *Topology) Drift(ctx context.Context, c *Conn, opts ...topology.DriftOption) ([]topology.Drift, error) {
	p, err := t.Plan()
	if err != nil {
		return nil, err
	}
	if _, ok := c.t.(driver.Inspector); !ok {
		return nil, fmt.Errorf("acemq: topology: the driver of %s cannot check what exists: %w", c, ErrUnsupported)
	}
	return topology.Check(ctx, c.t, p, opts...)
}
