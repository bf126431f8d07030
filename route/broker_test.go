package route_test

import (
	"context"
	"encoding/json"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	"go.uber.org/goleak"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/route"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// connect opens a connection recording its metrics into the returned
// reader, both closed when the test ends.
func connect(t *testing.T, url string) (*acemq.Conn, *sdkmetric.ManualReader) {
	t.Helper()
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
	return brokertest.Connect(t, url, acemq.WithMeterProvider(mp)), reader
}

// pipeline builds and declares a uniquely named pipeline, deleted when the
// test ends.
func pipeline(t *testing.T, c *acemq.Conn, steps ...string) *route.Pipeline {
	t.Helper()
	p, err := route.NewPipeline(c, testenv.Unique(t, "rt"), steps)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Declare(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.Background()
		for _, s := range steps {
			q := p.Queue(s)
			for _, n := range []string{q, contract.DeadLetterQueue(q), contract.ParkedQueue(q)} {
				_, _ = brokertest.Driver(c).DeleteQueue(ctx, n)
			}
		}
		_ = brokertest.Driver(c).DeleteExchange(ctx, p.Name())
	})
	return p
}

// offer hands v to a test without ever blocking a handler (a failing test
// must not also hang its consumers' drain).
func offer[T any](ch chan<- T, v T) {
	select {
	case ch <- v:
	default:
	}
}

type Order struct {
	ID    string   `json:"id"`
	Trail []string `json:"trail"`
}

type runMetric struct {
	Count    int64
	Duration metricdata.HistogramDataPoint[float64]
	HasDur   bool
}

// runMetrics collects the pipeline metrics, keyed "pipeline/step/outcome".
func runMetrics(t *testing.T, r *sdkmetric.ManualReader) map[string]runMetric {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := r.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	key := func(s attribute.Set) string {
		p, _ := s.Value("pipeline")
		st, _ := s.Value("step")
		o, _ := s.Value("outcome")
		return p.AsString() + "/" + st.AsString() + "/" + o.AsString()
	}
	out := map[string]runMetric{}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != telemetry.Scope {
			continue
		}
		for _, m := range sm.Metrics {
			switch m.Name {
			case "acemq.pipeline.run.total":
				for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
					e := out[key(dp.Attributes)]
					e.Count = dp.Value
					out[key(dp.Attributes)] = e
				}
			case "acemq.pipeline.run.duration":
				if m.Unit != "s" {
					t.Errorf("%s has unit %q, want s", m.Name, m.Unit)
				}
				for _, dp := range m.Data.(metricdata.Histogram[float64]).DataPoints {
					e := out[key(dp.Attributes)]
					e.Duration, e.HasDur = dp, true
					out[key(dp.Attributes)] = e
				}
			}
		}
	}
	return out
}

// waitMetric waits until the run that ended as key has both of its metrics
// recorded: the count and the duration. They are two instruments recorded
// one after the other at the run's end, and the SDK adds a data point to a
// collection before it counts the measurement (a collect in between reads
// the point with a zero count), so a key that merely exists is not yet a
// recorded run.
func waitMetric(t *testing.T, r *sdkmetric.ManualReader, key string) runMetric {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		if m := runMetrics(t, r)[key]; m.Count > 0 && m.HasDur && m.Duration.Count > 0 {
			return m
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("run metric %s: count and duration not both recorded within 15s; have %v", key, runMetrics(t, r))
	return runMetric{}
}

func TestPipelineRunsThreeSteps(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c, reader := connect(t, url)
		p := pipeline(t, c, "validate", "reserve", "ship")
		ctx := context.Background()
		at := map[string]chan acemq.Message[Order]{}
		var consumers []*acemq.Consumer
		for _, step := range p.Steps() {
			ch := make(chan acemq.Message[Order], 1)
			at[step] = ch
			cons, err := route.Step(ctx, p, step, func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
				o := m.Payload
				o.Trail = append(o.Trail, step)
				offer(ch, m)
				if step == "validate" {
					return route.Forward(o).As("order.validated").Header("x-validated-by", "test"), nil
				}
				return route.Forward(o), nil
			})
			if err != nil {
				t.Fatal(err)
			}
			consumers = append(consumers, cons)
		}
		defer brokertest.Stop(t, consumers...)

		startEnv := acemq.MustEnvelope(acemq.Fields{CorrelationID: "corr-1", Headers: map[string]any{"x-tenant": "acme"}})
		runID, err := p.Start(ctx, Order{ID: "o-1"}, route.WithEnvelope(startEnv))
		if err != nil {
			t.Fatal(err)
		}
		m1 := brokertest.Receive(t, at["validate"])
		m2 := brokertest.Receive(t, at["reserve"])
		m3 := brokertest.Receive(t, at["ship"])

		e1, e2, e3 := m1.Envelope, m2.Envelope, m3.Envelope
		if e1.Fields().RouteID != runID || e2.Fields().RouteID != runID || e3.Fields().RouteID != runID {
			t.Fatalf("run ids %q %q %q, want %q", e1.Fields().RouteID, e2.Fields().RouteID, e3.Fields().RouteID, runID)
		}
		for i, e := range []acemq.Envelope{e1, e2, e3} {
			if got := strings.Join(e.Fields().Route, ","); got != "validate,reserve,ship" {
				t.Fatalf("hop %d route %q", i, got)
			}
			if e.Fields().RoutePosition != i {
				t.Fatalf("hop %d position %d", i, e.Fields().RoutePosition)
			}
			if e.CorrelationID() != "corr-1" || e.Attempt() != 1 {
				t.Fatalf("hop %d correlation %q attempt %d", i, e.CorrelationID(), e.Attempt())
			}
			if !e.FirstSeen().Equal(e1.FirstSeen()) || !known(e) {
				t.Fatalf("hop %d first seen %v, want the run's %v", i, e.FirstSeen(), e1.FirstSeen())
			}
			if v, _ := e.Header("x-tenant"); v != "acme" {
				t.Fatalf("hop %d lost x-tenant: %v", i, e.Headers())
			}
			if _, ok := e.Header(wire.HeaderRoutingSlip); ok {
				t.Fatalf("hop %d carries a JSON slip in a declared run", i)
			}
		}
		if e2.ID() == e1.ID() || e3.ID() == e2.ID() || e2.CausationID() != e1.ID() || e3.CausationID() != e2.ID() {
			t.Fatalf("ids %s %s %s, causations %q %q", e1.ID(), e2.ID(), e3.ID(), e2.CausationID(), e3.CausationID())
		}
		if e1.Type() != "validate" || e2.Type() != "order.validated" || e3.Type() != "ship" {
			t.Fatalf("types %q %q %q", e1.Type(), e2.Type(), e3.Type())
		}
		if v, _ := e2.Header("x-validated-by"); v != "test" {
			t.Fatal("the step's header did not reach the next hop")
		}
		if _, ok := e3.Header("x-validated-by"); !ok {
			t.Fatal("application headers are not carried along the run")
		}
		if got := strings.Join(m3.Payload.Trail, ","); got != "validate,reserve" {
			t.Fatalf("trail at the last step %q", got)
		}
		if e2.Origin() != c.Origin() {
			t.Fatalf("hop origin %q, want %q", e2.Origin(), c.Origin())
		}
		if m2.Exchange != p.Name() || m2.RoutingKey != "reserve" || m2.Queue != p.Queue("reserve") {
			t.Fatalf("hop 2 arrived via %q/%q on %q", m2.Exchange, m2.RoutingKey, m2.Queue)
		}

		m := waitMetric(t, reader, p.Name()+"/ship/completed")
		if m.Count != 1 || !m.HasDur || m.Duration.Count != 1 || m.Duration.Sum < 0 {
			t.Fatalf("completed metric %+v", m)
		}
		if len(runMetrics(t, reader)) != 1 {
			t.Fatalf("other run metrics recorded: %v", runMetrics(t, reader))
		}
	})
}

func TestStepProducingNothingEndsTheRunEarly(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c, reader := connect(t, url)
		p := pipeline(t, c, "one", "two")
		ctx := context.Background()
		var second atomic.Int32
		c1, err := route.Step(ctx, p, "one", func(context.Context, acemq.Message[Order]) (route.Output[Order], error) {
			return route.End[Order](), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		c2, err := route.Step(ctx, p, "two", func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			second.Add(1)
			return route.Forward(m.Payload), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer brokertest.Stop(t, c1, c2)
		if _, err := p.Start(ctx, Order{ID: "o-2"}); err != nil {
			t.Fatal(err)
		}
		m := waitMetric(t, reader, p.Name()+"/one/ended_early")
		if m.Count != 1 || !m.HasDur {
			t.Fatalf("ended_early metric %+v", m)
		}
		info, err := brokertest.Driver(c).InspectQueue(ctx, p.Queue("two"))
		if err != nil {
			t.Fatal(err)
		}
		if second.Load() != 0 || info.Messages != 0 {
			t.Fatal("a step that produced nothing forwarded something")
		}
	})
}

func TestSlipRun(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c, reader := connect(t, url)
		ctx := context.Background()
		q1, q2 := brokertest.Queue(t, c, "rt"), brokertest.Queue(t, c, "rt")
		at1 := make(chan acemq.Message[Order], 1)
		at2 := make(chan acemq.Message[Order], 1)
		s1, err := route.Serve(ctx, c, q1, func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			offer(at1, m)
			return route.Forward(m.Payload), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		s2, err := route.Serve(ctx, c, q2, func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			offer(at2, m)
			return route.End[Order](), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer brokertest.Stop(t, s1, s2)
		slip := route.NewSlip(
			route.Stop{Exchange: "", RoutingKey: q1, Name: "validate"},
			route.Stop{Exchange: "", RoutingKey: q2},
		)
		sent, err := route.StartSlip(ctx, c, slip, Order{ID: "o-3"})
		if err != nil {
			t.Fatal(err)
		}
		m1, m2 := brokertest.Receive(t, at1), brokertest.Receive(t, at2)
		raw1, _ := m1.Envelope.Header(wire.HeaderRoutingSlip)
		if raw1 != slip.String() {
			t.Fatalf("slip at stop 1: %v", raw1)
		}
		if m1.Envelope.ID() != sent.ID() {
			t.Fatal("the first stop did not get the message StartSlip sent")
		}
		raw2, _ := m2.Envelope.Header(wire.HeaderRoutingSlip)
		s, err := route.ParseSlip([]byte(raw2.(string)))
		if err != nil {
			t.Fatal(err)
		}
		if len(s.Steps) != 1 || s.Steps[0].RoutingKey != q2 || len(s.Done) != 1 || s.Done[0].Name != "validate" {
			t.Fatalf("slip at stop 2: %s", raw2)
		}
		if d := time.Since(s.Done[0].CompletedAt); d < -2*time.Second || d > time.Minute {
			t.Fatalf("completedAt %v", s.Done[0].CompletedAt)
		}
		if !strings.HasSuffix(raw2.(string), `Z"}]}`) {
			t.Fatalf("completedAt not written to the second with Z: %s", raw2)
		}
		e2 := m2.Envelope
		if len(e2.Fields().Route) != 0 || e2.Fields().RouteID != "" {
			t.Fatal("a slip run grew a declared route")
		}
		if e2.CausationID() != sent.ID() || e2.CorrelationID() != sent.CorrelationID() || e2.Type() != q2 {
			t.Fatalf("hop envelope: causation %q correlation %q type %q", e2.CausationID(), e2.CorrelationID(), e2.Type())
		}
		// The last stop ends the run, whatever it returns.
		waitMetric(t, reader, q2+"/"+q2+"/completed")
	})
}

func TestJSONSlipWinsOverADeclaredRoute(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c, _ := connect(t, url)
		ctx := context.Background()
		p := pipeline(t, c, "a", "b")
		side := brokertest.Queue(t, c, "rt")
		var atB atomic.Int32
		ca, err := route.Step(ctx, p, "a", func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			return route.Forward(m.Payload), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		cb, err := route.Step(ctx, p, "b", func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			atB.Add(1)
			return route.Forward(m.Payload), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer brokertest.Stop(t, ca, cb)
		slip := route.NewSlip(route.Stop{Exchange: p.Name(), RoutingKey: "a", Name: "a"}, route.Stop{Exchange: "", RoutingKey: side, Name: "side"})
		env := acemq.MustEnvelope(acemq.Fields{Route: []string{"a", "b"}, RouteID: "run-1", Headers: map[string]any{wire.HeaderRoutingSlip: slip.String()}})
		body, _ := json.Marshal(Order{ID: "o-4"})
		if err := brokertest.Publish(ctx, c, brokertest.Outbound{Exchange: p.Name(), RoutingKey: "a", Envelope: env, ContentType: "application/json", Body: body}); err != nil {
			t.Fatal(err)
		}
		d := brokertest.Get(t, c, side)
		got := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
		raw, _ := got.Header(wire.HeaderRoutingSlip)
		s, err := route.ParseSlip([]byte(raw.(string)))
		if err != nil || len(s.Steps) != 1 || s.Steps[0].Name != "side" || len(s.Done) != 1 {
			t.Fatalf("slip %v (%v)", raw, err)
		}
		// Both forms arrived, so both are written back, advanced together.
		if got.Fields().RoutePosition != 1 || got.Fields().RouteID != "run-1" {
			t.Fatalf("declared route written back at %d, run %q", got.Fields().RoutePosition, got.Fields().RouteID)
		}
		if atB.Load() != 0 {
			t.Fatal("the declared route won over the slip")
		}
	})
}

func TestUnparseableSlipIsDeadLettered(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c, _ := connect(t, url)
		ctx := context.Background()
		p := pipeline(t, c, "a", "b")
		var called atomic.Int32
		ca, err := route.Step(ctx, p, "a", func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			called.Add(1)
			return route.Forward(m.Payload), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		env := acemq.MustEnvelope(acemq.Fields{Headers: map[string]any{wire.HeaderRoutingSlip: `{"steps":`}})
		if err := brokertest.Publish(ctx, c, brokertest.Outbound{Exchange: p.Name(), RoutingKey: "a", Envelope: env, ContentType: "application/json", Body: []byte(`{"id":"o-5"}`)}); err != nil {
			t.Fatal(err)
		}
		d := brokertest.Get(t, c, contract.DeadLetterQueue(p.Queue("a")))
		brokertest.Stop(t, ca)
		reason := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID).Reason()
		if !strings.HasPrefix(reason, "the handler reported an unprocessable message: ") || !strings.Contains(reason, "routing slip") {
			t.Fatalf("reason %q", reason)
		}
		if called.Load() != 0 {
			t.Fatal("the handler ran for an unreadable slip")
		}
	})
}

func TestMessageWithoutARouteGetsAFreshOne(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c, _ := connect(t, url)
		ctx := context.Background()
		p := pipeline(t, c, "a", "b", "c")
		atB := make(chan acemq.Message[Order], 1)
		atC := make(chan acemq.Message[Order], 1)
		cb, err := route.Step(ctx, p, "b", func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			offer(atB, m)
			return route.Forward(m.Payload), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		cc, err := route.Step(ctx, p, "c", func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			offer(atC, m)
			return route.Forward(m.Payload), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer brokertest.Stop(t, cb, cc)
		pub := acemq.NewPublisher[Order](c, p.Name())
		if _, err := pub.Send(ctx, "b", Order{ID: "o-6"}); err != nil {
			t.Fatal(err)
		}
		mb, mc := brokertest.Receive(t, atB), brokertest.Receive(t, atC)
		if strings.Join(mb.Envelope.Fields().Route, ",") != "a,b,c" || mb.Envelope.Fields().RoutePosition != 1 || mb.Envelope.Fields().RouteID == "" {
			t.Fatalf("fresh route %v at %d, run %q", mb.Envelope.Fields().Route, mb.Envelope.Fields().RoutePosition, mb.Envelope.Fields().RouteID)
		}
		if mc.Envelope.Fields().RouteID != mb.Envelope.Fields().RouteID || mc.Envelope.Fields().RoutePosition != 2 {
			t.Fatalf("next hop run %q at %d", mc.Envelope.Fields().RouteID, mc.Envelope.Fields().RoutePosition)
		}
	})
}

func TestRouteWithoutRunIDGetsOneOnTheNextHop(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c, _ := connect(t, url)
		ctx := context.Background()
		p := pipeline(t, c, "a", "b")
		atA := make(chan acemq.Message[Order], 1)
		atB := make(chan acemq.Message[Order], 1)
		ca, err := route.Step(ctx, p, "a", func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			offer(atA, m)
			return route.Forward(m.Payload), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		cb, err := route.Step(ctx, p, "b", func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			offer(atB, m)
			return route.End[Order](), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer brokertest.Stop(t, ca, cb)
		env := acemq.MustEnvelope(acemq.Fields{Route: []string{"a", "b"}})
		pub := acemq.NewPublisher[Order](c, p.Name())
		if _, err := pub.Send(ctx, "a", Order{ID: "o-7"}, acemq.WithEnvelope(env)); err != nil {
			t.Fatal(err)
		}
		ma, mb := brokertest.Receive(t, atA), brokertest.Receive(t, atB)
		if ma.Envelope.Fields().RouteID != "" {
			t.Fatalf("the first hop was given a run id %q on read", ma.Envelope.Fields().RouteID)
		}
		if mb.Envelope.Fields().RouteID == "" || mb.Envelope.Fields().RoutePosition != 1 {
			t.Fatalf("the next hop has run %q at %d", mb.Envelope.Fields().RouteID, mb.Envelope.Fields().RoutePosition)
		}
	})
}

func TestStepRetryPolicyPassesThrough(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c, _ := connect(t, url)
		ctx := context.Background()
		p := pipeline(t, c, "a", "b")
		var tries atomic.Int32
		atA := make(chan acemq.Message[Order], 2)
		atB := make(chan acemq.Message[Order], 1)
		ca, err := route.Step(ctx, p, "a", func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			offer(atA, m)
			if tries.Add(1) == 1 {
				return route.Output[Order]{}, fmt.Errorf("the inventory service timed out")
			}
			return route.Forward(m.Payload), nil
		}, acemq.WithRetry(retry.Fixed(2, 10*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		cb, err := route.Step(ctx, p, "b", func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			offer(atB, m)
			return route.End[Order](), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		defer brokertest.Stop(t, ca, cb)
		runID, err := p.Start(ctx, Order{ID: "o-8"})
		if err != nil {
			t.Fatal(err)
		}
		first, second, mb := brokertest.Receive(t, atA), brokertest.Receive(t, atA), brokertest.Receive(t, atB)
		if first.Envelope.Attempt() != 1 || second.Envelope.Attempt() != 2 || second.Envelope.ID() != first.Envelope.ID() {
			t.Fatalf("attempts %d, %d", first.Envelope.Attempt(), second.Envelope.Attempt())
		}
		if mb.Envelope.Attempt() != 1 || mb.Envelope.CausationID() != first.Envelope.ID() || mb.Envelope.Fields().RouteID != runID {
			t.Fatalf("next hop attempt %d causation %q run %q", mb.Envelope.Attempt(), mb.Envelope.CausationID(), mb.Envelope.Fields().RouteID)
		}
	})
}

func TestForwardThatCannotBeRoutedIsNotLost(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c, _ := connect(t, url)
		ctx := context.Background()
		p, err := route.NewPipeline(c, testenv.Unique(t, "rt"), []string{"a", "b"})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() {
			q := p.Queue("a")
			for _, n := range []string{q, contract.DeadLetterQueue(q), contract.ParkedQueue(q)} {
				_, _ = brokertest.Driver(c).DeleteQueue(context.Background(), n)
			}
			_ = brokertest.Driver(c).DeleteExchange(context.Background(), p.Name())
		})
		// Only step a's consumer runs (and declares its queue); b's queue does not exist.
		ca, err := route.Step(ctx, p, "a", func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			return route.Forward(m.Payload), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		runID, err := p.Start(ctx, Order{ID: "o-9"})
		if err != nil {
			t.Fatal(err)
		}
		d := brokertest.Get(t, c, contract.DeadLetterQueue(p.Queue("a")))
		brokertest.Stop(t, ca)
		env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
		if !strings.HasPrefix(env.Reason(), "exhausted 1 attempts: ") || !strings.Contains(env.Reason(), "312") {
			t.Fatalf("reason %q", env.Reason())
		}
		if env.Fields().RouteID != runID || env.Fields().RoutePosition != 0 {
			t.Fatalf("dead letter run %q position %d", env.Fields().RouteID, env.Fields().RoutePosition)
		}
	})
}

func TestServeWithoutASlipDeadLetters(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c, _ := connect(t, url)
		ctx := context.Background()
		q := brokertest.Queue(t, c, "rt")
		s, err := route.Serve(ctx, c, q, func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			return route.Forward(m.Payload), nil
		})
		if err != nil {
			t.Fatal(err)
		}
		pub := acemq.NewPublisher[Order](c, "")
		if _, err := pub.Send(ctx, q, Order{ID: "o-10"}); err != nil {
			t.Fatal(err)
		}
		d := brokertest.Get(t, c, contract.DeadLetterQueue(q))
		brokertest.Stop(t, s)
		if r := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID).Reason(); !strings.Contains(r, "acemq-routing-slip") {
			t.Fatalf("reason %q", r)
		}
	})
}

func TestNewPipelineRefusesBadNames(t *testing.T) {
	c, _ := connect(t, brokertest.MemoryURL(t))
	for _, tc := range []struct {
		name  string
		steps []string
	}{
		{"", []string{"a"}},
		{"p,q", []string{"a"}},
		{"p", nil},
		{"p", []string{"a,b"}},
		{"p", []string{"a", "a"}},
		{"p", []string{"-a"}},
	} {
		if _, err := route.NewPipeline(c, tc.name, tc.steps); err == nil {
			t.Errorf("NewPipeline(%q, %q) was accepted", tc.name, tc.steps)
		}
	}
	p, err := route.NewPipeline(c, "orders", []string{"validate", "ship"})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := route.Step(context.Background(), p, "nope", func(context.Context, acemq.Message[Order]) (route.Output[Order], error) {
		return route.End[Order](), nil
	}); err == nil {
		t.Fatal("Step accepted a step the pipeline does not have")
	}
	if p.Queue("ship") != "orders.ship" {
		t.Fatalf("queue %q", p.Queue("ship"))
	}
}

func TestReservedHeaderOnAnOutputIsFatal(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c, _ := connect(t, url)
		ctx := context.Background()
		p := pipeline(t, c, "a", "b")
		var tries atomic.Int32
		ca, err := route.Step(ctx, p, "a", func(_ context.Context, m acemq.Message[Order]) (route.Output[Order], error) {
			tries.Add(1)
			return route.Forward(m.Payload).Header("x-acemq-mine", "no"), nil
		}, acemq.WithRetry(retry.Fixed(3, 10*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		if _, err := p.Start(ctx, Order{ID: "o-11"}); err != nil {
			t.Fatal(err)
		}
		d := brokertest.Get(t, c, contract.DeadLetterQueue(p.Queue("a")))
		brokertest.Stop(t, ca)
		reason := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID).Reason()
		if !strings.HasPrefix(reason, "the handler reported an unprocessable message: ") || !strings.Contains(reason, "x-acemq-mine") {
			t.Fatalf("reason %q", reason)
		}
		if tries.Load() != 1 {
			t.Fatalf("the step ran %d times; a fatal output must not be retried", tries.Load())
		}
		if n := brokertest.Depth(t, c, p.Queue("b")); n != 0 {
			t.Fatalf("%d messages reached step b", n)
		}
	})
}

// known reports whether e's first-seen time came with the message.
func known(e acemq.Envelope) bool {
	_, ok := e.Age()
	return ok
}
