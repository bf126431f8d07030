package saga

import (
	"time"

	"go.opentelemetry.io/otel/metric"
)

// An Option configures New. Every option is a function named With…, as
// across the module.
type Option interface{ apply(*config) }

type config struct {
	lease        time.Duration
	owner        string
	resume       ResumePolicy
	onUnresolved func(id, step string, err error)
	meter        metric.MeterProvider
}

type option func(*config)

func (f option) apply(c *config) { f(c) }

// DefaultLease is how long a runner holds a saga between two log writes
// before Resume elsewhere may take it over.
const DefaultLease = 5 * time.Minute

// ResumePolicy says what Resume does with a saga that was Running.
type ResumePolicy int

// The resume policies.
const (
	// Forward goes on from the step the saga was at (the default).
	Forward ResumePolicy = iota
	// Compensate undoes the steps that completed.
	Compensate
)

// WithLease sets how long a runner holds a saga between log writes
// (default 5 min): make it longer than the slowest step.
func WithLease(d time.Duration) Option { return option(func(c *config) { c.lease = d }) }

// WithOwner names this runner in the log (default a fresh UUID per New).
// A stable name (the host's, say) lets a restarted process Resume its own
// sagas at once instead of waiting out their leases; never give two live
// processes the same name.
func WithOwner(name string) Option { return option(func(c *config) { c.owner = name }) }

// WithResume sets what Resume does with a saga that was Running (default
// Forward).
func WithResume(p ResumePolicy) Option { return option(func(c *config) { c.resume = p }) }

// WithOnUnresolved calls f for each compensation that fails (the saga
// goes on undoing the others and ends Unresolved; Saga.Unresolved lists
// it).
func WithOnUnresolved(f func(id, step string, err error)) Option {
	return option(func(c *config) { c.onUnresolved = f })
}

// WithMeterProvider records the saga's metrics through mp (default: the
// global provider, otel.GetMeterProvider, when New runs): acemq.saga.total
// per saga instance that ends (tags saga, state = completed, compensated or
// unresolved) and acemq.saga.compensation.failed per failed compensation
// (tags saga, step). Alert on the second: each is a saga a person must
// finish.
func WithMeterProvider(mp metric.MeterProvider) Option {
	return option(func(c *config) { c.meter = mp })
}
