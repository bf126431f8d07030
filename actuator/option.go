package actuator

import (
	"github.com/prometheus/client_golang/prometheus"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

type config struct {
	app      application
	registry *prometheus.Registry
	sdkOpts  []sdkmetric.Option
	token    string
}

// An Option configures New. Every option is a function named With….
type Option interface{ apply(*config) }

type option func(*config)

func (f option) apply(c *config) { f(c) }

// WithApplication names the application and its version for /acemq-info.
func WithApplication(name, version string) Option {
	return option(func(c *config) { c.app = application{name, version} })
}

// WithRegistry renders the metrics through reg instead of a registry of the
// Endpoints' own, so that /acemq-metrics also shows what else is
// registered there (for example Go runtime collectors). The family's
// metrics must not collide with names already in reg.
func WithRegistry(reg *prometheus.Registry) Option {
	return option(func(c *config) { c.registry = reg })
}

// WithMeterProviderOptions passes options (a resource, more readers or
// views) to the SDK meter provider New builds.
func WithMeterProviderOptions(opts ...sdkmetric.Option) Option {
	return option(func(c *config) { c.sdkOpts = append(c.sdkOpts, opts...) })
}

// WithToken makes every request carry token, as "Authorization: Bearer
// token" (Prometheus: the scrape config's authorization credentials; a
// Kubernetes probe: an httpHeaders entry), and then answers requests
// addressed to any name. Without a token the endpoints answer only
// requests addressed to a loopback name (localhost, 127.0.0.1, [::1]),
// which keeps out a web page that points its own name at 127.0.0.1 (DNS
// rebinding) to read the health report; serve them on a loopback address
// only.
func WithToken(token string) Option { return option(func(c *config) { c.token = token }) }
