// Package actuator serves the AceMQ family's operational endpoints over
// HTTP (docs/wire.md §11.6):
//
//   - /acemq-metrics: the family's metrics in the Prometheus text format,
//     rendered by the official Prometheus client from an OpenTelemetry SDK
//     meter provider that the Endpoints own;
//   - /acemq-health: the health of the watched connections and checks, as
//     the family's JSON report; HTTP 503 only when it is down;
//   - /acemq-info: the library, the application and what the transport
//     supports, as JSON.
//
// The root package acemq depends on the OpenTelemetry API only; this
// package brings in the SDK, the Prometheus exporter and the Prometheus
// client, so a program pays for them only when it imports it.
//
// A program builds the Endpoints first, connects with their meter
// provider, then watches the connection:
//
//	ep, err := actuator.New(actuator.WithApplication("orders", "1.4.2"))
//	if err != nil { … }
//	conn, err := acemq.Connect(ctx, url, acemq.WithMeterProvider(ep.MeterProvider()))
//	if err != nil { … }
//	ep.Watch(conn)
//	ep.AddHealthCheck("database", actuator.HealthFunc(pingDB))
//	go actuator.ListenAndServe(ctx, actuator.DefaultAddr, ep)
//
// Without WithToken the endpoints answer only requests addressed to a
// loopback name (localhost, 127.0.0.1, [::1]): bind them to the loopback
// interface (the default). With a token they answer requests addressed to
// any name that carry it (Authorization: Bearer TOKEN). Serve them over
// TLS (a proxy) when the token crosses a network.
package actuator

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"net/http"
	"runtime/debug"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/engine"
	"github.com/acemq/acemq/internal/hostguard"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"
	"github.com/prometheus/otlptranslator"
	otelprom "go.opentelemetry.io/otel/exporters/prometheus"
	"go.opentelemetry.io/otel/sdk/instrumentation"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
)

// Endpoint paths and the default bind address (docs/wire.md §11.6, §12).
const (
	PathMetrics = "/acemq-metrics"
	PathHealth  = "/acemq-health"
	PathInfo    = "/acemq-info"
	DefaultAddr = "127.0.0.1:9464"
)

// Library is the library name /acemq-info reports.
const Library = "acemq-go"

// HealthUnknown is the status /acemq-health reports, with HTTP 200, while
// no connection or check is watched.
const HealthUnknown acemq.HealthStatus = "unknown"

// Endpoints is an http.Handler serving the family's endpoints, and the
// OpenTelemetry meter provider whose metrics /acemq-metrics renders. It is
// safe for concurrent use.
type Endpoints struct {
	registry *prometheus.Registry
	provider *sdkmetric.MeterProvider
	mux      *http.ServeMux
	app      application
	guard    hostguard.Guard

	mu     sync.Mutex
	conns  []*acemq.Conn
	checks []namedCheck
}

type application struct {
	name, version string
}

// New builds the Endpoints and their meter provider. Pass MeterProvider to
// acemq.WithMeterProvider (or install it with otel.SetMeterProvider) so the
// connections' metrics reach /acemq-metrics.
//
// Metric names are rendered with dots as underscores and no suffixes
// added: acemq.publish.total is acemq_publish_total, acemq.publish.duration
// is acemq_publish_duration (in seconds, not acemq_publish_duration_seconds).
// Durations use buckets from 5 ms to 60 s, attempts 1 to 10. No
// otel_scope_* labels and no target_info metric are written.
func New(opts ...Option) (*Endpoints, error) {
	var cfg config
	for _, o := range opts {
		o.apply(&cfg)
	}
	reg := cfg.registry
	if reg == nil {
		reg = prometheus.NewRegistry()
	}
	exp, err := otelprom.New(
		otelprom.WithRegisterer(reg),
		otelprom.WithTranslationStrategy(otlptranslator.UnderscoreEscapingWithoutSuffixes),
		otelprom.WithoutScopeInfo(),
		otelprom.WithoutTargetInfo(),
	)
	if err != nil {
		return nil, fmt.Errorf("actuator: creating the Prometheus exporter: %w", err)
	}
	sdkOpts := append([]sdkmetric.Option{
		sdkmetric.WithReader(exp),
		sdkmetric.WithView(bucketView(sdkmetric.InstrumentKindHistogram, "s", telemetry.DurationBuckets())),
		sdkmetric.WithView(sdkmetric.NewView(
			sdkmetric.Instrument{Name: telemetry.ConsumeAttempts, Scope: instrumentation.Scope{Name: telemetry.Scope}},
			sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: telemetry.AttemptBuckets()}},
		)),
	}, cfg.sdkOpts...)
	a := &Endpoints{
		registry: reg,
		provider: sdkmetric.NewMeterProvider(sdkOpts...),
		app:      cfg.app,
		guard: hostguard.Guard{
			Name:       "this acemq actuator",
			Token:      cfg.token,
			NeedsToken: "send Authorization: Bearer TOKEN",
		},
	}
	a.mux = http.NewServeMux()
	a.mux.Handle("GET "+PathMetrics, promhttp.HandlerFor(reg, promhttp.HandlerOpts{ErrorHandling: promhttp.ContinueOnError}))
	a.mux.HandleFunc("GET "+PathHealth, a.serveHealth)
	a.mux.HandleFunc("GET "+PathInfo, a.serveInfo)
	return a, nil
}

// bucketView gives every family histogram of the unit (durations in
// seconds, including those of packages built on acemq) the same buckets.
func bucketView(kind sdkmetric.InstrumentKind, unit string, bounds []float64) sdkmetric.View {
	return sdkmetric.NewView(
		sdkmetric.Instrument{Name: "acemq.*", Kind: kind, Unit: unit, Scope: instrumentation.Scope{Name: telemetry.Scope}},
		sdkmetric.Stream{Aggregation: sdkmetric.AggregationExplicitBucketHistogram{Boundaries: bounds}},
	)
}

// MeterProvider is the SDK meter provider whose metrics /acemq-metrics
// renders.
func (a *Endpoints) MeterProvider() *sdkmetric.MeterProvider { return a.provider }

// Registry is the Prometheus registry /acemq-metrics renders.
func (a *Endpoints) Registry() *prometheus.Registry { return a.registry }

// Watch adds a connection: its health joins /acemq-health, as a part named
// after the connection (its WithName, else its URL without the password),
// and, for the first connection watched, its capabilities make
// /acemq-info's transport. Watching does not record its metrics: connect
// with acemq.WithMeterProvider(a.MeterProvider()) for that.
func (a *Endpoints) Watch(c *acemq.Conn) {
	name := c.Name()
	if name == "" {
		name = c.URL()
	}
	a.mu.Lock()
	a.conns = append(a.conns, c)
	a.checks = append(a.checks, namedCheck{name, c})
	a.mu.Unlock()
}

// AddHealthCheck adds a named check (a database, a downstream service) to
// /acemq-health.
func (a *Endpoints) AddHealthCheck(name string, check HealthCheck) {
	a.mu.Lock()
	a.checks = append(a.checks, namedCheck{name, check})
	a.mu.Unlock()
}

// Health is the report /acemq-health serves: the worst of the watched
// connections and checks (down, then degraded, then up), each kept as a
// part named after it, a check that has not answered within
// DefaultHealthTimeout counting as down; or HealthUnknown when nothing is
// watched.
func (a *Endpoints) Health(ctx context.Context) acemq.HealthReport {
	a.mu.Lock()
	checks := append([]namedCheck(nil), a.checks...)
	a.mu.Unlock()
	if len(checks) == 0 {
		return acemq.HealthReport{
			Status:  HealthUnknown,
			Detail:  "no connection or health check is watched",
			Checked: time.Now().UTC(),
			Parts:   map[string]any{},
		}
	}
	return aggregate(ctx, checks)
}

// Shutdown stops the meter provider. The handler keeps serving, with no
// new measurements.
func (a *Endpoints) Shutdown(ctx context.Context) error { return a.provider.Shutdown(ctx) }

// ServeHTTP serves /acemq-metrics, /acemq-health and /acemq-info (GET and
// HEAD); any other path is 404. A request addressed to a name other than
// a loopback one is refused (403) unless the Endpoints have a token
// (WithToken), and then every request without the token is (401).
func (a *Endpoints) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	if !a.guard.Admit(w, r) {
		return
	}
	a.mux.ServeHTTP(w, r)
}

// IsLoopback reports whether addr (host:port, as given to net.Listen)
// listens on the loopback interface only. A listener anywhere else needs
// a token (WithToken): without one, the endpoints refuse every request
// not addressed to a loopback name.
func IsLoopback(addr string) bool { return hostguard.LoopbackAddr(addr) }

func (a *Endpoints) serveHealth(w http.ResponseWriter, r *http.Request) {
	rep := a.Health(r.Context())
	code := http.StatusOK
	if rep.Status == acemq.HealthDown {
		code = http.StatusServiceUnavailable
	}
	writeJSON(w, code, rep)
}

// Info is the /acemq-info document.
type Info struct {
	Library        string `json:"library"`
	LibraryVersion string `json:"libraryVersion"`
	// Name and Version are the application's (WithApplication).
	Name    string `json:"name"`
	Version string `json:"version"`
	// Transport maps each capability of the family's vocabulary to whether
	// the first watched connection's broker supports it; all false while
	// none is watched. transactions is always false: the library does
	// not offer them. priority is true while a connection is watched
	// (acemq.WithPriority and WithMaxPriority work on both built-in
	// brokers); delayed-delivery is the scheduler (package schedule), which
	// needs dead-lettering.
	Transport map[string]bool `json:"transport"`
}

// Info is the document /acemq-info serves.
func (a *Endpoints) Info() Info {
	a.mu.Lock()
	var caps driver.Capabilities
	watched := len(a.conns) > 0
	if watched {
		caps = engine.Of(a.conns[0]).Capabilities()
	}
	a.mu.Unlock()
	return Info{
		Library:        Library,
		LibraryVersion: LibraryVersion(),
		Name:           a.app.name,
		Version:        a.app.version,
		Transport: map[string]bool{
			"publisher-confirms": caps.PublisherConfirms,
			"dead-lettering":     caps.DeadLettering,
			"quorum-queues":      caps.QuorumQueues,
			"streams":            caps.Streams,
			"recovery":           caps.Recovery,
			"transactions":       false,
			"priority":           watched,
			"delayed-delivery":   caps.DeadLettering,
		},
	}
}

func (a *Endpoints) serveInfo(w http.ResponseWriter, r *http.Request) {
	writeJSON(w, http.StatusOK, a.Info())
}

// LibraryVersion is the version of module github.com/acemq/acemq in the
// running binary's build information, or "devel" when it has none (a
// build from a checkout of the module itself, or go run).
func LibraryVersion() string {
	bi, ok := debug.ReadBuildInfo()
	if !ok {
		return "devel"
	}
	const mod = "github.com/acemq/acemq"
	v := ""
	if bi.Main.Path == mod {
		v = bi.Main.Version
	}
	for _, d := range bi.Deps {
		if d.Path == mod {
			v = d.Version
			if d.Replace != nil && d.Replace.Version != "" {
				v = d.Replace.Version
			}
		}
	}
	if v == "" || v == "(devel)" {
		return "devel"
	}
	return v
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	b, err := json.Marshal(v)
	if err != nil {
		http.Error(w, "actuator: encoding the response: "+err.Error(), http.StatusInternalServerError)
		return
	}
	w.Header().Set("Content-Type", "application/json")
	w.Header().Set("Cache-Control", "no-store")
	w.WriteHeader(code)
	_, _ = w.Write(append(b, '\n'))
}

// ListenAndServe serves h on addr (DefaultAddr, 127.0.0.1:9464, when
// empty) until ctx is done, then shuts the server down, giving requests in
// progress up to 5 s. It returns nil after a shutdown caused by ctx, and
// the listener's error otherwise (for example, the port is taken).
func ListenAndServe(ctx context.Context, addr string, h http.Handler) error {
	if addr == "" {
		addr = DefaultAddr
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return fmt.Errorf("actuator: listening on %s: %w", addr, err)
	}
	return Serve(ctx, ln, h)
}

// Serve is ListenAndServe on a listener the caller opened (for example on
// port 0, to learn the port from ln.Addr).
func Serve(ctx context.Context, ln net.Listener, h http.Handler) error {
	srv := &http.Server{
		Handler:           h,
		ReadHeaderTimeout: 5 * time.Second,
		WriteTimeout:      30 * time.Second,
		IdleTimeout:       60 * time.Second,
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.Serve(ln) }()
	select {
	case err := <-errc:
		return fmt.Errorf("actuator: serving on %s: %w", ln.Addr(), err)
	case <-ctx.Done():
	}
	sctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
	defer cancel()
	err := srv.Shutdown(sctx)
	if serr := <-errc; serr != nil && !errors.Is(serr, http.ErrServerClosed) && err == nil {
		err = serr
	}
	return err
}
