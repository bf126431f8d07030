package acemq

import (
	"context"
	"testing"

	"github.com/acemq/acemq/driver"
	"go.opentelemetry.io/otel"
	metricnoop "go.opentelemetry.io/otel/metric/noop"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// TestTelemetryCostsNoAllocations: with the global no-op providers, or
// configured no-op ones, the hooks on the publish and consume paths
// allocate nothing and write no headers.
func TestTelemetryCostsNoAllocations(t *testing.T) {
	if !isGlobalTracerDelegate(otel.GetTracerProvider()) {
		t.Skip("a test in this binary installed a global tracer provider")
	}
	cases := map[string]telemetryConfig{
		"global": {},
		"noop":   {meters: metricnoop.NewMeterProvider(), tracers: tracenoop.NewTracerProvider()},
	}
	for name, cfg := range cases {
		t.Run(name, func(t *testing.T) {
			o := newObserver(cfg)
			if o.tracing() {
				t.Fatalf("tracing is on with %s providers", name)
			}
			env := MustEnvelope(Fields{Type: "order.placed"})
			m := driver.Message{RoutingKey: "orders", Headers: env.AppendHeaders(nil, "orders")}
			d := driver.Delivery{RoutingKey: "orders", Headers: m.Headers}
			s := Settlement{Queue: "orders", Envelope: env, Outcome: OutcomeRetried, Where: WhereConsumer}
			ctx := context.Background()
			n := len(m.Headers)
			allocs := testing.AllocsPerRun(200, func() {
				_, done := o.publishStart(ctx, &m, identity(&env))
				done(nil, 0)
				hctx, end := o.processStart(ctx, "orders", &d, env)
				if end != nil || hctx != ctx {
					t.Fatal("processStart started a span")
				}
				o.settled(s)
				o.connEvent(driver.Event{Kind: driver.EventLost})
			})
			if allocs != 0 {
				t.Errorf("%v allocations per message with %s providers, want 0", allocs, name)
			}
			if len(m.Headers) != n {
				t.Errorf("publishStart wrote headers with tracing off: %v", m.Headers)
			}
		})
	}
}

func TestTableCarrier(t *testing.T) {
	var tbl driver.Table
	c := tableCarrier{t: &tbl}
	if c.Get("traceparent") != "" || len(c.Keys()) != 0 {
		t.Fatal("an empty carrier has values")
	}
	c.Set("traceparent", "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01")
	if tbl == nil || c.Get("traceparent") == "" || len(c.Keys()) != 1 {
		t.Fatalf("Set did not create the table: %v", tbl)
	}
	tbl["tracestate"] = []byte("k=v")
	if c.Get("tracestate") != "k=v" {
		t.Errorf("a []byte header is not read: %q", c.Get("tracestate"))
	}
	tbl["tracestate"] = int32(7)
	if c.Get("tracestate") != "" {
		t.Errorf("a non-string header is read as %q", c.Get("tracestate"))
	}
}

func TestPublishOutcome(t *testing.T) {
	cases := []struct {
		err       error
		confirmed bool
		want      string
	}{
		{nil, true, "confirmed"},
		{nil, false, "published"},
		{&driver.ReturnError{Code: 312, Text: "NO_ROUTE"}, true, "unroutable"},
		{driver.ErrBlocked, true, "refused"},
		{driver.ErrLost, true, "failed"},
		{driver.ErrNacked, true, "failed"},
		{context.DeadlineExceeded, true, "failed"},
	}
	for _, c := range cases {
		if got := publishOutcome(c.err, c.confirmed); got != c.want {
			t.Errorf("publishOutcome(%v, %v) = %s, want %s", c.err, c.confirmed, got, c.want)
		}
	}
}

// BenchmarkTelemetryHooks measures the telemetry hooks of one message
// alone (publish, process, settlement), without a broker.
func BenchmarkTelemetryHooks(b *testing.B) {
	b.Run("none", func(b *testing.B) { benchHooks(b, telemetryConfig{}) })
	b.Run("noop", func(b *testing.B) {
		benchHooks(b, telemetryConfig{meters: metricnoop.NewMeterProvider(), tracers: tracenoop.NewTracerProvider()})
	})
}

func benchHooks(b *testing.B, cfg telemetryConfig) {
	o := newObserver(cfg)
	env := MustEnvelope(Fields{Type: "order.placed"})
	m := driver.Message{RoutingKey: "orders", Headers: env.AppendHeaders(nil, "orders")}
	d := driver.Delivery{RoutingKey: "orders", Headers: m.Headers}
	s := Settlement{Queue: "orders", Envelope: env, Outcome: OutcomeAcked}
	ctx := context.Background()
	b.ReportAllocs()
	for b.Loop() {
		_, done := o.publishStart(ctx, &m, identity(&env))
		done(nil, 0)
		_, end := o.processStart(ctx, "orders", &d, env)
		if end != nil {
			end(s)
		}
		o.settled(s)
	}
}

// FuzzTraceHeaders feeds arbitrary traceparent and tracestate values, as
// a delivery from anyone may carry, through the process and publish spans:
// nothing panics, a malformed parent starts a new trace, and the publish
// writes a well-formed traceparent of the same trace as the process span.
func FuzzTraceHeaders(f *testing.F) {
	f.Add("00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "congo=t61rcWkgMzE")
	f.Add("00-00000000000000000000000000000000-0000000000000000-00", "")
	f.Add("ff-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01", "a=1,b=2")
	f.Add("garbage", "=,=,=")
	f.Add("", "")
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	o := newObserver(telemetryConfig{meters: metricnoop.NewMeterProvider(), tracers: tp})
	env := MustEnvelope(Fields{Type: "t"})
	f.Fuzz(func(t *testing.T, parent, state string) {
		d := driver.Delivery{Headers: driver.Table{"traceparent": parent, "tracestate": []byte(state)}}
		ctx, end := o.processStart(context.Background(), "q", &d, env)
		if end == nil {
			t.Fatal("no process span with an SDK tracer provider")
		}
		proc := trace.SpanContextFromContext(ctx)
		if !proc.IsValid() {
			t.Fatal("the process span has no valid context")
		}
		m := driver.Message{RoutingKey: "q"}
		_, done := o.publishStart(trace.ContextWithSpanContext(context.Background(), trace.SpanContextFromContext(ctx)), &m, identity(&env)) // as the consume engine parents a republish
		done(nil, 0)
		end(Settlement{Queue: "q", Outcome: OutcomeAcked})
		got, _ := m.Headers["traceparent"].(string)
		sc := trace.SpanContextFromContext(propagator.Extract(context.Background(), tableCarrier{t: &m.Headers}))
		if !sc.IsValid() || sc.TraceID() != proc.TraceID() {
			t.Fatalf("the publish wrote traceparent %q, not of trace %s", got, proc.TraceID())
		}
	})
}

// Queues named for one process's lifetime are tagged by their pattern;
// names an application chose are kept as they are.
func TestMetricQueueName(t *testing.T) {
	for in, want := range map[string]string{
		"acemq-reply-0f8c2b1e-5d3a-4c7e-9b6f-2a1d3e4f5a6b":                   "acemq-reply-*",
		"acemq-reply-0F8C2B1E5D3A4C7E9B6F2A1D3E4F5A6B":                       "acemq-reply-*",
		"acemq.reply.0f8c2b1e-5d3a-4c7e-9b6f-2a1d3e4f5a6b":                   "acemq.reply.*", // Java
		"acemq.reply.0f8c2b1e5d3a4c7e9b6f2a1d3e4f5a6b":                       "acemq.reply.*", // .NET, Guid "N"
		"amq.gen-JzTY20BRgKO-HjmUJj0wLg":                                     "amq.gen-*",
		"amq.rabbitmq.reply-to.g1h2AA5yZXBseUAxNjc4MjQ3NjQ1AAAR5QAAAABYo2Y=": "amq.rabbitmq.reply-to.*",
		"acemq-reply-pricing":                                                "acemq-reply-pricing", // named by the application
		"acemq-reply-0f8c2b1e-5d3a-4c7e-9b6f-2a1d3e4f5a6b.x":                 "acemq-reply-0f8c2b1e-5d3a-4c7e-9b6f-2a1d3e4f5a6b.x",
		"acemq.reply.zz8c2b1e5d3a4c7e9b6f2a1d3e4f5a6b":                       "acemq.reply.zz8c2b1e5d3a4c7e9b6f2a1d3e4f5a6b",
		"orders": "orders",
		"":       "",
	} {
		if got := metricQueueName(in); got != want {
			t.Errorf("metricQueueName(%q) = %q, want %q", in, got, want)
		}
	}
}
