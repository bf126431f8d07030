package acemq

import (
	"context"
	"errors"
	"fmt"

	"github.com/acemq/acemq/driver"
)

// DriftKind says how the broker differs from a topology.
type DriftKind string

// The kinds of drift.
const (
	// DriftMissing: the exchange or queue does not exist; Apply would
	// create it.
	DriftMissing DriftKind = "missing"
	// DriftDifferent: it exists with other settings; the broker refused a
	// declaration with the topology's settings (Detail is its text). Only
	// reported with WithSettingsProbe.
	DriftDifferent DriftKind = "different"
	// DriftUnchecked: it may exist but could not be checked (for example,
	// no configure permission, or an exclusive queue of another
	// connection).
	DriftUnchecked DriftKind = "unchecked"
)

// Drift is one difference between a topology and the broker.
type Drift struct {
	Declaration Declaration
	Kind        DriftKind
	Detail      string
}

// String renders the drift as one line: kind, declaration, detail.
func (d Drift) String() string {
	if d.Detail == "" {
		return fmt.Sprintf("%s: %s", d.Kind, d.Declaration)
	}
	return fmt.Sprintf("%s: %s: %s", d.Kind, d.Declaration, d.Detail)
}

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
func (t *Topology) Drift(ctx context.Context, c *Conn, opts ...DriftOption) ([]Drift, error) {
	var cfg driftConfig
	for _, o := range opts {
		o.applyDrift(&cfg)
	}
	p, err := t.Plan()
	if err != nil {
		return nil, err
	}
	ins, ok := c.t.(driver.Inspector)
	if !ok {
		return nil, fmt.Errorf("acemq: topology: the driver of %s cannot check what exists: %w", c, ErrUnsupported)
	}
	var out []Drift
	for _, d := range p {
		var ierr error
		switch d.Kind {
		case ExchangeDeclaration:
			ierr = ins.InspectExchange(ctx, d.Exchange.Name)
		case QueueDeclaration:
			_, ierr = ins.InspectQueue(ctx, d.Queue.Name)
		default:
			continue
		}
		switch {
		case ierr == nil:
		case errors.Is(ierr, driver.ErrNotFound):
			out = append(out, Drift{Declaration: d, Kind: DriftMissing})
			continue
		case ctx.Err() != nil:
			return out, ctx.Err()
		default:
			out = append(out, Drift{Declaration: d, Kind: DriftUnchecked, Detail: ierr.Error()})
			continue
		}
		if !cfg.probe {
			continue
		}
		err = d.apply(ctx, c.t)
		var pe *driver.PreconditionError
		switch {
		case err == nil:
		case errors.As(err, &pe):
			out = append(out, Drift{Declaration: d, Kind: DriftDifferent, Detail: pe.Detail})
		case ctx.Err() != nil:
			return out, ctx.Err()
		default:
			out = append(out, Drift{Declaration: d, Kind: DriftUnchecked, Detail: err.Error()})
		}
	}
	return out, nil
}
