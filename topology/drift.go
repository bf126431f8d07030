package topology

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

// A DriftOption configures Topology.Drift and Check.
type DriftOption interface{ applyDrift(*driftConfig) }

type driftConfig struct{ probe bool }

type driftOption func(*driftConfig)

func (f driftOption) applyDrift(c *driftConfig) { f(c) }

// WithSettingsProbe makes Drift also look for exchanges and queues that
// exist with different settings, by repeating the topology's own
// declaration of each one the passive check found: the broker accepts that
// as a no-op when the settings are equivalent and refuses it with
// PRECONDITION_FAILED (reported as DriftDifferent) when they are not. It
// is not passive: it needs configure permission (without it the entry is
// DriftUnchecked), and a connection that recovers from a lost link
// redeclares what it declared, probes included.
func WithSettingsProbe() DriftOption {
	return driftOption(func(c *driftConfig) { c.probe = true })
}

// Check reports how the broker behind c differs from p, without changing
// anything (unless WithSettingsProbe); Topology.Drift is Check of the
// topology's Plan, and documents what is and is not checked. c must be
// a driver.Inspector: else the error wraps errors.ErrUnsupported.
func Check(ctx context.Context, c driver.Conn, p Plan, opts ...DriftOption) ([]Drift, error) {
	var cfg driftConfig
	for _, o := range opts {
		o.applyDrift(&cfg)
	}
	ins, ok := c.(driver.Inspector)
	if !ok {
		return nil, fmt.Errorf("topology: the driver cannot check what exists: %w", errors.ErrUnsupported)
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
		err := d.Declare(ctx, c)
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
