package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	_ "github.com/acemq/acemq/rabbitmq"
	"github.com/acemq/acemq/retry"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
	tracenoop "go.opentelemetry.io/otel/trace/noop"
)

// tel is an SDK meter and tracer provider recording into memory.
type tel struct {
	reader *sdkmetric.ManualReader
	mp     *sdkmetric.MeterProvider
	spans  *tracetest.SpanRecorder
	tp     *sdktrace.TracerProvider
}

func newTel(t testing.TB) *tel {
	x := &tel{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	x.mp = sdkmetric.NewMeterProvider(sdkmetric.WithReader(x.reader))
	x.tp = sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(x.spans))
	t.Cleanup(func() {
		_ = x.mp.Shutdown(context.Background())
		_ = x.tp.Shutdown(context.Background())
	})
	return x
}

func (x *tel) options() []acemq.ConnOption {
	return []acemq.ConnOption{acemq.WithMeterProvider(x.mp), acemq.WithTracerProvider(x.tp)}
}

// metric returns the named metric of the acemq scope, or ok false.
func (x *tel) metric(t testing.TB, name string) (metricdata.Metrics, bool) {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := x.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatalf("collecting metrics: %v", err)
	}
	for _, sm := range rm.ScopeMetrics {
		if sm.Scope.Name != acemq.InstrumentationScope {
			t.Fatalf("metrics recorded under scope %q, want %q", sm.Scope.Name, acemq.InstrumentationScope)
		}
		for _, m := range sm.Metrics {
			if m.Name == name {
				return m, true
			}
		}
	}
	return metricdata.Metrics{}, false
}

func attrsOf(kv map[string]string) attribute.Set {
	var as []attribute.KeyValue
	for k, v := range kv {
		as = append(as, attribute.String(k, v))
	}
	return attribute.NewSet(as...)
}

// count is the value of an int64 counter or gauge series with exactly
// these tags (0 when absent).
func (x *tel) count(t testing.TB, name string, tags map[string]string) int64 {
	t.Helper()
	m, ok := x.metric(t, name)
	if !ok {
		return 0
	}
	want := attrsOf(tags)
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		if !d.IsMonotonic || d.Temporality != metricdata.CumulativeTemporality {
			t.Fatalf("%s is not a cumulative counter", name)
		}
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Value
			}
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Value
			}
		}
	default:
		t.Fatalf("%s is a %T, not an int64 counter or gauge", name, m.Data)
	}
	return 0
}

// series lists the tag sets of a metric's points, rendered k=v,… sorted.
func (x *tel) series(t testing.TB, name string) []string {
	t.Helper()
	m, ok := x.metric(t, name)
	if !ok {
		return nil
	}
	var sets []attribute.Set
	switch d := m.Data.(type) {
	case metricdata.Sum[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[float64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	case metricdata.Gauge[int64]:
		for _, p := range d.DataPoints {
			sets = append(sets, p.Attributes)
		}
	}
	var out []string
	for _, s := range sets {
		var kv []string
		for _, a := range s.ToSlice() {
			kv = append(kv, string(a.Key)+"="+a.Value.String())
		}
		out = append(out, strings.Join(kv, ","))
	}
	sort.Strings(out)
	return out
}

// hist is the count and sum of a histogram series with exactly these tags;
// it also checks the unit and, for durations, the 5 ms–60 s buckets.
func (x *tel) hist(t testing.TB, name string, tags map[string]string) (uint64, float64) {
	t.Helper()
	m, ok := x.metric(t, name)
	if !ok {
		return 0, 0
	}
	want := attrsOf(tags)
	switch d := m.Data.(type) {
	case metricdata.Histogram[float64]:
		if m.Unit != "s" {
			t.Errorf("%s has unit %q, want s", name, m.Unit)
		}
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				if got := fmt.Sprint(p.Bounds); got != fmt.Sprint(acemq.DurationBuckets()) {
					t.Errorf("%s buckets %s, want %v", name, got, acemq.DurationBuckets())
				}
				return p.Count, p.Sum
			}
		}
	case metricdata.Histogram[int64]:
		for _, p := range d.DataPoints {
			if p.Attributes.Equals(&want) {
				return p.Count, float64(p.Sum)
			}
		}
	default:
		t.Fatalf("%s is a %T, not a histogram", name, m.Data)
	}
	return 0, 0
}

// ended lists the ended spans with this name.
func (x *tel) ended(name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range x.spans.Ended() {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

func spanAttr(s sdktrace.ReadOnlySpan, key string) (attribute.Value, bool) {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value, true
		}
	}
	return attribute.Value{}, false
}

func wantAttr(t testing.TB, s sdktrace.ReadOnlySpan, key string, want any) {
	t.Helper()
	v, ok := spanAttr(s, key)
	if !ok {
		t.Errorf("span %q has no attribute %s", s.Name(), key)
		return
	}
	if got := v.AsInterface(); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Errorf("span %q: %s = %v, want %v", s.Name(), key, got, want)
	}
}

func spanEvent(s sdktrace.ReadOnlySpan, name string) (sdktrace.Event, bool) {
	for _, e := range s.Events() {
		if e.Name == name {
			return e, true
		}
	}
	return sdktrace.Event{}, false
}

func isChildOf(child sdktrace.ReadOnlySpan, parent trace.SpanContext) bool {
	return child.Parent().TraceID() == parent.TraceID() && child.Parent().SpanID() == parent.SpanID()
}

// backends runs f against memory:// and, when ACEMQ_TEST_AMQP_URL is set,
// RabbitMQ.
// telRig is a connection recording into tel, a fresh queue and the
// settlements seen on it.
type telRig struct {
	t       *testing.T
	c       *acemq.Conn
	tel     *tel
	q       string
	settled chan acemq.Settlement
}

func newTelRig(t *testing.T, url string) *telRig {
	t.Helper()
	ctx := context.Background()
	x := newTel(t)
	c, err := acemq.Connect(ctx, url, x.options()...)
	if err != nil {
		t.Fatalf("Connect: %v", err)
	}
	r := &telRig{t: t, c: c, tel: x, q: "acemq.tel." + randomHex(4), settled: make(chan acemq.Settlement, 1000)}
	t.Cleanup(func() {
		_ = c.Close(context.Background())
	})
	t.Cleanup(func() {
		for _, q := range []string{r.q, contract.DeadLetterQueue(r.q), contract.ParkedQueue(r.q), contract.RungQueue(r.q, time.Second)} {
			_, _ = brokertest.Driver(c).DeleteQueue(context.Background(), q)
		}
	})
	if _, err := brokertest.Driver(c).DeclareQueue(ctx, driver.Queue{Name: r.q, Durable: true}); err != nil {
		t.Fatalf("declaring %s: %v", r.q, err)
	}
	c.OnSettle(func(s acemq.Settlement) {
		select {
		case r.settled <- s:
		default:
		}
	})
	return r
}

// publish sends body to the telRig queue under an application span and
// returns that span's context.
func (r *telRig) publish(body string) (acemq.Envelope, trace.SpanContext) {
	r.t.Helper()
	ctx, app := r.tel.tp.Tracer("test").Start(context.Background(), "app")
	defer app.End()
	env, err := acemq.NewPublisher[string](r.c, "").Send(ctx, r.q, body)
	if err != nil {
		r.t.Fatalf("Send: %v", err)
	}
	return env, app.SpanContext()
}

func (r *telRig) consume(h acemq.Handler[string], opts ...acemq.ConsumeOption) *acemq.Consumer {
	r.t.Helper()
	k, err := acemq.Consume(context.Background(), r.c, r.q, h, opts...)
	if err != nil {
		r.t.Fatalf("Consume: %v", err)
	}
	r.t.Cleanup(func() { _ = k.Close(context.Background()) })
	return k
}

// byOutcome returns the one settlement with outcome o.
func byOutcome(t testing.TB, ss []acemq.Settlement, o acemq.Outcome) acemq.Settlement {
	t.Helper()
	var found []acemq.Settlement
	for _, s := range ss {
		if s.Outcome == o {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		t.Fatalf("%d settlements with outcome %s in %+v", len(found), o, ss)
	}
	return found[0]
}

// wait returns the next n settlements, in the order they were emitted
// (a settlement held by a wait in the consumer may come after the next
// attempt's).
func (r *telRig) wait(n int) []acemq.Settlement {
	r.t.Helper()
	var out []acemq.Settlement
	deadline := time.After(30 * time.Second)
	for len(out) < n {
		select {
		case s := <-r.settled:
			out = append(out, s)
		case <-deadline:
			r.t.Fatalf("saw %d of %d settlements within 30s: %+v", len(out), n, out)
		}
	}
	return out
}

func (r *telRig) checkPublishSpan(s sdktrace.ReadOnlySpan, dest, routingKey, outcome string) {
	t := r.t
	t.Helper()
	if s.SpanKind() != trace.SpanKindProducer {
		t.Errorf("span %q kind %v, want producer", s.Name(), s.SpanKind())
	}
	if s.InstrumentationScope().Name != acemq.InstrumentationScope {
		t.Errorf("span %q scope %q", s.Name(), s.InstrumentationScope().Name)
	}
	wantAttr(t, s, "messaging.system", "rabbitmq")
	wantAttr(t, s, "messaging.operation", "publish")
	wantAttr(t, s, "messaging.destination.name", dest)
	wantAttr(t, s, "messaging.rabbitmq.destination.routing_key", routingKey)
	wantAttr(t, s, "messaging.acemq.outcome", outcome)
}

func (r *telRig) checkProcessSpan(s sdktrace.ReadOnlySpan, attempt int, outcome string) {
	t := r.t
	t.Helper()
	if s.SpanKind() != trace.SpanKindConsumer {
		t.Errorf("span %q kind %v, want consumer", s.Name(), s.SpanKind())
	}
	wantAttr(t, s, "messaging.system", "rabbitmq")
	wantAttr(t, s, "messaging.operation", "process")
	wantAttr(t, s, "messaging.destination.name", r.q)
	wantAttr(t, s, "messaging.acemq.attempt", attempt)
	wantAttr(t, s, "messaging.acemq.outcome", outcome)
}

// spanFor finds the one ended span named name whose parent is parent.
func (r *telRig) spanFor(name string, parent trace.SpanContext) sdktrace.ReadOnlySpan {
	r.t.Helper()
	var found []sdktrace.ReadOnlySpan
	for _, s := range r.tel.ended(name) {
		if isChildOf(s, parent) {
			found = append(found, s)
		}
	}
	if len(found) != 1 {
		var all []string
		for _, s := range r.tel.spans.Ended() {
			all = append(all, fmt.Sprintf("%s(%s parent %s)", s.Name(), s.SpanContext().SpanID(), s.Parent().SpanID()))
		}
		r.t.Fatalf("found %d spans %q with parent %s; ended: %v", len(found), name, parent.SpanID(), all)
	}
	return found[0]
}

func (r *telRig) wantCount(name string, tags map[string]string, want int64) {
	r.t.Helper()
	if got := r.tel.count(r.t, name, tags); got != want {
		r.t.Errorf("%s%v = %d, want %d (series: %v)", name, tags, got, want, r.tel.series(r.t, name))
	}
}

func TestTelemetryAcked(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newTelRig(t, url)
		var handlerSpan atomic.Value
		r.consume(func(ctx context.Context, m acemq.Message[string]) acemq.Ack {
			handlerSpan.Store(trace.SpanContextFromContext(ctx))
			tp, _ := m.Envelope.Header("traceparent")
			if tp == nil {
				t.Errorf("the delivery carries no traceparent header")
			}
			return acemq.Accept()
		})
		env, app := r.publish("hello")
		s := r.wait(1)[0]
		if s.Outcome != acemq.OutcomeAcked {
			t.Fatalf("outcome %s", s.Outcome)
		}

		pub := r.spanFor(r.q+" publish", app)
		r.checkPublishSpan(pub, r.q, r.q, "confirmed")
		wantAttr(t, pub, "messaging.message.id", env.ID())
		wantAttr(t, pub, "messaging.message.conversation_id", env.CorrelationID())
		wantAttr(t, pub, "messaging.acemq.message_type", r.q) // the type defaults to the routing key
		if pub.Status().Code != codes.Unset {
			t.Errorf("confirmed publish span status %v", pub.Status())
		}
		proc := r.spanFor(r.q+" process", pub.SpanContext())
		r.checkProcessSpan(proc, 1, "acked")
		wantAttr(t, proc, "messaging.message.id", env.ID())
		wantAttr(t, proc, "messaging.message.conversation_id", env.CorrelationID())
		wantAttr(t, proc, "messaging.acemq.message_type", r.q)
		if proc.Status().Code != codes.Unset {
			t.Errorf("acked process span status %v", proc.Status())
		}
		if got := handlerSpan.Load().(trace.SpanContext); got.SpanID() != proc.SpanContext().SpanID() {
			t.Errorf("the handler's context carries span %s, want the process span %s", got.SpanID(), proc.SpanContext().SpanID())
		}

		r.wantCount("acemq.publish.total", map[string]string{"exchange": "", "routing.key": r.q, "outcome": "confirmed"}, 1)
		if n, _ := r.tel.hist(t, "acemq.publish.duration", map[string]string{"exchange": "", "routing.key": r.q, "outcome": "confirmed"}); n != 1 {
			t.Errorf("acemq.publish.duration count %d, want 1", n)
		}
		r.wantCount("acemq.consume.total", map[string]string{"queue": r.q, "outcome": "acked"}, 1)
		if n, _ := r.tel.hist(t, "acemq.consume.duration", map[string]string{"queue": r.q, "outcome": "acked"}); n != 1 {
			t.Errorf("acemq.consume.duration count %d, want 1", n)
		}
		if n, sum := r.tel.hist(t, "acemq.consume.attempts", map[string]string{"queue": r.q}); n != 1 || sum != 1 {
			t.Errorf("acemq.consume.attempts count %d sum %v, want 1 and 1", n, sum)
		}
		for _, name := range []string{"acemq.messages.retried.total", "acemq.messages.dead.lettered.total", "acemq.messages.set.aside.failed", "acemq.retry.rung.missing"} {
			if s := r.tel.series(t, name); len(s) != 0 {
				t.Errorf("%s has series %v after an ack", name, s)
			}
		}
	})
}

func TestTelemetryRetriedInConsumer(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newTelRig(t, url)
		r.consume(func(ctx context.Context, m acemq.Message[string]) acemq.Ack {
			if m.Envelope.Attempt() == 1 {
				return acemq.Retry(errors.New("the ledger was busy"))
			}
			return acemq.Accept()
		}, acemq.WithRetry(retry.Fixed(2, 20*time.Millisecond)))
		_, app := r.publish("again")
		ss := r.wait(2)
		if s := byOutcome(t, ss, acemq.OutcomeRetried); s.Where != acemq.WhereConsumer {
			t.Fatalf("retried settlement %+v", s)
		}
		byOutcome(t, ss, acemq.OutcomeAcked)
		pub := r.spanFor(r.q+" publish", app)
		first := r.spanFor(r.q+" process", pub.SpanContext())
		r.checkProcessSpan(first, 1, "retried")
		wantAttr(t, first, "messaging.acemq.retry_delay_ms", 20)
		if v, _ := spanAttr(first, "messaging.acemq.reason"); !strings.Contains(v.AsString(), "the ledger was busy") {
			t.Errorf("reason %q", v.AsString())
		}
		ev, ok := spanEvent(first, "message.retried")
		if !ok {
			t.Fatalf("no message.retried event on the retried span")
		}
		if got := fmt.Sprint(ev.Attributes); !strings.Contains(got, "messaging.acemq.retry_delay_ms") || !strings.Contains(got, "the ledger was busy") {
			t.Errorf("message.retried attributes %s", got)
		}
		if first.Status().Code != codes.Unset {
			t.Errorf("retried span status %v", first.Status())
		}
		// The republish is a child of the first process span, and the
		// second delivery's span a child of the republish.
		re := r.spanFor(r.q+" publish", first.SpanContext())
		r.checkPublishSpan(re, r.q, r.q, "confirmed")
		second := r.spanFor(r.q+" process", re.SpanContext())
		r.checkProcessSpan(second, 2, "acked")

		r.wantCount("acemq.consume.total", map[string]string{"queue": r.q, "outcome": "retried"}, 1)
		r.wantCount("acemq.consume.total", map[string]string{"queue": r.q, "outcome": "acked"}, 1)
		r.wantCount("acemq.messages.retried.total", map[string]string{"queue": r.q, "where": "consumer"}, 1)
		r.wantCount("acemq.publish.total", map[string]string{"exchange": "", "routing.key": r.q, "outcome": "confirmed"}, 2)
		if n, sum := r.tel.hist(t, "acemq.consume.attempts", map[string]string{"queue": r.q}); n != 2 || sum != 3 {
			t.Errorf("acemq.consume.attempts count %d sum %v, want 2 and 3", n, sum)
		}
	})
}

func TestTelemetryRetriedOnBroker(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newTelRig(t, url)
		r.consume(func(ctx context.Context, m acemq.Message[string]) acemq.Ack {
			if m.Envelope.Attempt() == 1 {
				return acemq.Retry(errors.New("later"))
			}
			return acemq.Accept()
		}, acemq.WithRetry(retry.Fixed(2, time.Second).WaitInBrokerFrom(time.Second)))
		_, app := r.publish("rung")
		ss := r.wait(2)
		rung := contract.RungQueue(r.q, time.Second)
		if s := byOutcome(t, ss, acemq.OutcomeRetried); s.Where != acemq.WhereBroker || s.Target != rung {
			t.Fatalf("retried settlement %+v", s)
		}
		byOutcome(t, ss, acemq.OutcomeAcked)
		pub := r.spanFor(r.q+" publish", app)
		first := r.spanFor(r.q+" process", pub.SpanContext())
		r.checkProcessSpan(first, 1, "retried")
		wantAttr(t, first, "messaging.acemq.retry_delay_ms", 1000)
		re := r.spanFor(rung+" publish", first.SpanContext())
		r.checkPublishSpan(re, rung, rung, "confirmed")
		// The broker dead-letters the copy back with its headers: the
		// second attempt is a child of the rung publish.
		second := r.spanFor(r.q+" process", re.SpanContext())
		r.checkProcessSpan(second, 2, "acked")

		r.wantCount("acemq.messages.retried.total", map[string]string{"queue": r.q, "where": "broker"}, 1)
		r.wantCount("acemq.publish.total", map[string]string{"exchange": "", "routing.key": rung, "outcome": "confirmed"}, 1)
		r.wantCount("acemq.consume.total", map[string]string{"queue": r.q, "outcome": "retried"}, 1)
	})
}

func TestTelemetrySetAsides(t *testing.T) {
	cases := []struct {
		name    string
		ack     acemq.Ack
		outcome acemq.Outcome
		target  func(string) string
		dl      string // acemq.messages.dead.lettered.total outcome
		event   string
		reason  string
		status  codes.Code
	}{
		{"rejected", acemq.Reject(errors.New("bad total")), acemq.OutcomeRejected, contract.DeadLetterQueue, "dead_lettered", "message.dead_lettered", "the handler rejected it: ", codes.Unset},
		{"dead_lettered", acemq.Retry(errors.New("still failing")), acemq.OutcomeDeadLettered, contract.DeadLetterQueue, "dead_lettered", "message.dead_lettered", "exhausted 1 attempts: ", codes.Error},
		{"fatal", acemq.Retry(acemq.Fatal(errors.New("no such customer"))), acemq.OutcomeRejected, contract.DeadLetterQueue, "dead_lettered", "message.dead_lettered", "the handler reported an unprocessable message: ", codes.Unset},
		{"parked", acemq.Park(errors.New("needs a human")), acemq.OutcomeParked, contract.ParkedQueue, "parked", "message.parked", "the handler parked it: ", codes.Unset},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			brokertest.Each(t, func(t *testing.T, url string) {
				r := newTelRig(t, url)
				r.consume(func(context.Context, acemq.Message[string]) acemq.Ack { return tc.ack })
				_, app := r.publish("x")
				s := r.wait(1)[0]
				if s.Outcome != tc.outcome {
					t.Fatalf("outcome %s, want %s", s.Outcome, tc.outcome)
				}
				pub := r.spanFor(r.q+" publish", app)
				proc := r.spanFor(r.q+" process", pub.SpanContext())
				r.checkProcessSpan(proc, 1, string(tc.outcome))
				if v, _ := spanAttr(proc, "messaging.acemq.reason"); !strings.HasPrefix(v.AsString(), tc.reason) {
					t.Errorf("reason %q, want the prefix %q", v.AsString(), tc.reason)
				}
				if _, ok := spanEvent(proc, tc.event); !ok {
					t.Errorf("no %s event", tc.event)
				}
				if proc.Status().Code != tc.status {
					t.Errorf("status %v, want %v", proc.Status().Code, tc.status)
				}
				target := tc.target(r.q)
				copySpan := r.spanFor(target+" publish", proc.SpanContext())
				r.checkPublishSpan(copySpan, target, target, "confirmed")

				r.wantCount("acemq.consume.total", map[string]string{"queue": r.q, "outcome": string(tc.outcome)}, 1)
				r.wantCount("acemq.messages.dead.lettered.total", map[string]string{"queue": r.q, "outcome": tc.dl}, 1)
				if s := r.tel.series(t, "acemq.messages.retried.total"); len(s) != 0 {
					t.Errorf("acemq.messages.retried.total has series %v", s)
				}
			})
		})
	}
}

func TestTelemetryPanicIsRecorded(t *testing.T) {
	r := newTelRig(t, brokertest.MemoryURL(t))
	r.consume(func(context.Context, acemq.Message[string]) acemq.Ack { panic("nil map") })
	_, app := r.publish("x")
	if s := r.wait(1)[0]; s.Outcome != acemq.OutcomeRejected {
		t.Fatalf("outcome %s", s.Outcome)
	}
	proc := r.spanFor(r.q+" process", r.spanFor(r.q+" publish", app).SpanContext())
	if proc.Status().Code != codes.Error {
		t.Errorf("a panic's span status is %v, want error", proc.Status())
	}
	if _, ok := spanEvent(proc, "exception"); !ok {
		t.Errorf("the panic is not recorded as an exception event")
	}
}

func TestTelemetryInProgress(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newTelRig(t, url)
		var n atomic.Int32
		r.consume(func(context.Context, acemq.Message[string]) acemq.Ack {
			if n.Add(1) == 1 {
				return acemq.InProgress(30 * time.Millisecond)
			}
			return acemq.Accept()
		})
		_, app := r.publish("claimed")
		ss := r.wait(2)
		byOutcome(t, ss, acemq.OutcomeInProgress)
		byOutcome(t, ss, acemq.OutcomeAcked)
		first := r.spanFor(r.q+" process", r.spanFor(r.q+" publish", app).SpanContext())
		r.checkProcessSpan(first, 1, "in_progress")
		wantAttr(t, first, "messaging.acemq.retry_delay_ms", 30)
		back := r.spanFor(r.q+" publish", first.SpanContext())
		second := r.spanFor(r.q+" process", back.SpanContext())
		r.checkProcessSpan(second, 1, "acked") // attempt unchanged
		r.wantCount("acemq.consume.total", map[string]string{"queue": r.q, "outcome": "in_progress"}, 1)
		r.wantCount("acemq.consume.total", map[string]string{"queue": r.q, "outcome": "acked"}, 1)
		if s := r.tel.series(t, "acemq.messages.retried.total"); len(s) != 0 {
			t.Errorf("an in-progress put-back counted as a retry: %v", s)
		}
	})
}

func TestTelemetryMissingTargets(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		t.Run("set-aside", func(t *testing.T) {
			r := newTelRig(t, url)
			// Published before the consumer starts: the copy keeps the
			// message-id, so its return must not race the original's
			// confirm (see the rabbitmq driver's return matching).
			r.publish("x")
			k := r.consume(func(context.Context, acemq.Message[string]) acemq.Ack {
				return acemq.Reject(errors.New("bad"))
			}, acemq.WithDeclarations(false))
			s := r.wait(1)[0]
			if err := k.Close(context.Background()); err != nil {
				t.Fatalf("Close: %v", err)
			}
			if s.Outcome != acemq.OutcomeRequeued || s.SetAsideFailed != contract.DeadLetterQueue(r.q) {
				t.Fatalf("settlement %+v", s)
			}
			if got := r.tel.count(t, "acemq.messages.set.aside.failed", map[string]string{"queue": r.q, "target": contract.DeadLetterQueue(r.q)}); got < 1 {
				t.Errorf("acemq.messages.set.aside.failed = %d, want at least 1", got)
			}
			for _, s := range r.tel.series(t, "acemq.consume.total") {
				t.Errorf("a requeued delivery was counted in acemq.consume.total: %s", s)
			}
			for _, s := range r.tel.series(t, "acemq.messages.dead.lettered.total") {
				t.Errorf("a failed set-aside was counted as dead-lettered: %s", s)
			}
			for _, p := range r.tel.ended(r.q + " process") {
				wantAttr(t, p, "messaging.acemq.outcome", "requeued")
			}
			// The copy that did not route is a failed publish.
			for _, p := range r.tel.ended(contract.DeadLetterQueue(r.q) + " publish") {
				wantAttr(t, p, "messaging.acemq.outcome", "unroutable")
				if p.Status().Code != codes.Error {
					t.Errorf("unroutable publish span status %v", p.Status())
				}
			}
		})
		t.Run("rung", func(t *testing.T) {
			r := newTelRig(t, url)
			r.publish("x") // before the consumer, as above
			r.consume(func(ctx context.Context, m acemq.Message[string]) acemq.Ack {
				if m.Envelope.Attempt() == 1 {
					return acemq.Retry(errors.New("later"))
				}
				return acemq.Accept()
			}, acemq.WithDeclarations(false), acemq.WithRetry(retry.Fixed(2, time.Second).WaitInBrokerFrom(time.Second)))
			ss := r.wait(2)
			rung := contract.RungQueue(r.q, time.Second)
			if s := byOutcome(t, ss, acemq.OutcomeRetried); s.RungMissing != rung || s.Where != acemq.WhereConsumer {
				t.Fatalf("retried settlement %+v", s)
			}
			byOutcome(t, ss, acemq.OutcomeAcked)
			r.wantCount("acemq.retry.rung.missing", map[string]string{"queue": r.q, "rung": rung}, 1)
			r.wantCount("acemq.messages.retried.total", map[string]string{"queue": r.q, "where": "consumer"}, 1)
			r.wantCount("acemq.publish.total", map[string]string{"exchange": "", "routing.key": rung, "outcome": "unroutable"}, 1)
		})
	})
}

func TestTelemetryUnroutable(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newTelRig(t, url)
		nowhere := "acemq.tel.nowhere." + randomHex(4)
		ctx, app := r.tel.tp.Tracer("test").Start(context.Background(), "app")
		_, err := acemq.NewPublisher[string](r.c, "").Send(ctx, nowhere, "lost")
		app.End()
		var ue *driver.ReturnError
		if !errors.As(err, &ue) {
			t.Fatalf("Send to %s: %v, want an driver.ReturnError", nowhere, err)
		}
		pub := r.spanFor(nowhere+" publish", app.SpanContext())
		r.checkPublishSpan(pub, nowhere, nowhere, "unroutable")
		if pub.Status().Code != codes.Error {
			t.Errorf("unroutable publish span status %v", pub.Status())
		}
		r.wantCount("acemq.publish.total", map[string]string{"exchange": "", "routing.key": nowhere, "outcome": "unroutable"}, 1)
	})
}

func TestTelemetryPublishToExchangeNamesTheExchange(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newTelRig(t, url)
		ex := "acemq.tel.ex." + randomHex(4)
		ctx := context.Background()
		if err := brokertest.Driver(r.c).DeclareExchange(ctx, driver.Exchange{Name: ex, Kind: driver.Topic}); err != nil {
			t.Fatal(err)
		}
		t.Cleanup(func() { _ = brokertest.Driver(r.c).DeleteExchange(context.Background(), ex) })
		if err := brokertest.Driver(r.c).Bind(ctx, driver.Binding{Queue: r.q, Exchange: ex, RoutingKey: "order.*"}); err != nil {
			t.Fatal(err)
		}
		if _, err := acemq.NewPublisher[string](r.c, ex).Send(ctx, "order.placed", "o-1"); err != nil {
			t.Fatal(err)
		}
		spans := r.tel.ended(ex + " publish")
		if len(spans) != 1 {
			t.Fatalf("%d spans named %q", len(spans), ex+" publish")
		}
		r.checkPublishSpan(spans[0], ex, "order.placed", "confirmed")
		if spans[0].Parent().IsValid() {
			t.Errorf("a publish from a context without a span has a parent")
		}
		r.wantCount("acemq.publish.total", map[string]string{"exchange": ex, "routing.key": "order.placed", "outcome": "confirmed"}, 1)
	})
}

func TestTelemetryInFlightGauge(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newTelRig(t, url)
		release := make(chan struct{})
		r.consume(func(context.Context, acemq.Message[string]) acemq.Ack {
			<-release
			return acemq.Accept()
		})
		r.publish("slow")
		tags := map[string]string{"queue": r.q}
		testenv.Eventually(t, "acemq.consume.in.flight = 1", func() bool { return r.tel.count(t, "acemq.consume.in.flight", tags) == 1 })
		close(release)
		r.wait(1)
		testenv.Eventually(t, "acemq.consume.in.flight = 0", func() bool { return r.tel.count(t, "acemq.consume.in.flight", tags) == 0 })
		m, _ := r.tel.metric(t, "acemq.consume.in.flight")
		if _, ok := m.Data.(metricdata.Gauge[int64]); !ok {
			t.Errorf("acemq.consume.in.flight is a %T, want a gauge", m.Data)
		}
	})
}

// TestTelemetryWithoutProviders: with the global no-op providers a publish
// writes no trace headers, and a delivery's traceparent passes through a
// republish unchanged.
func TestTelemetryWithoutProviders(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c, err := acemq.Connect(ctx, url)
		if err != nil {
			t.Fatal(err)
		}
		defer c.Close(ctx)
		q := "acemq.tel.none." + randomHex(4)
		if _, err := brokertest.Driver(c).DeclareQueue(ctx, driver.Queue{Name: q, Durable: true}); err != nil {
			t.Fatal(err)
		}
		defer func() {
			for _, n := range []string{q, contract.DeadLetterQueue(q), contract.ParkedQueue(q)} {
				_, _ = brokertest.Driver(c).DeleteQueue(ctx, n)
			}
		}()
		if _, err := acemq.NewPublisher[string](c, "").Send(ctx, q, "plain"); err != nil {
			t.Fatal(err)
		}
		d, ok, err := brokertest.Driver(c).Get(ctx, q)
		if err != nil || !ok {
			t.Fatalf("Get: %v %v", ok, err)
		}
		_ = d.Ack()
		for _, h := range []string{"traceparent", "tracestate"} {
			if v, ok := d.Headers[h]; ok {
				t.Errorf("a publish without a tracer provider wrote %s = %v", h, v)
			}
		}
		// A traceparent written by someone else is carried by a republish.
		const parent = "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01"
		env, err := acemq.NewEnvelope(acemq.Fields{Headers: map[string]any{"traceparent": parent}})
		if err != nil {
			t.Fatal(err)
		}
		if err := brokertest.Publish(ctx, c, brokertest.Outbound{RoutingKey: q, Envelope: env, Body: []byte(`"x"`), ContentType: "application/json"}); err != nil {
			t.Fatal(err)
		}
		k, err := acemq.Consume(ctx, c, q, func(context.Context, acemq.Message[string]) acemq.Ack {
			return acemq.Park(errors.New("keep"))
		})
		if err != nil {
			t.Fatal(err)
		}
		var parked driver.Delivery
		testenv.Eventually(t, "the parked copy", func() bool {
			d, ok, err := brokertest.Driver(c).Get(ctx, contract.ParkedQueue(q))
			if err == nil && ok {
				parked = d
				_ = d.Ack()
			}
			return ok
		})
		_ = k.Close(ctx)
		if got := parked.Headers["traceparent"]; got != parent {
			t.Errorf("the parked copy's traceparent is %v, want %s", got, parent)
		}
	})
}

// Conn.Tracing says whether spans are recorded: not with the global
// provider while no SDK is installed there, not with a no-op provider, yes
// with an SDK provider.
func TestConnTracing(t *testing.T) {
	ctx := context.Background()
	for _, tc := range []struct {
		name string
		opts []acemq.ConnOption
		want bool
	}{
		{"global without an SDK", nil, false},
		{"no-op provider", []acemq.ConnOption{acemq.WithTracerProvider(tracenoop.NewTracerProvider())}, false},
		{"SDK provider", newTel(t).options(), true},
	} {
		c, err := acemq.Connect(ctx, "memory://", tc.opts...)
		if err != nil {
			t.Fatal(err)
		}
		if got := brokertest.Tracing(c); got != tc.want {
			t.Errorf("%s: Tracing() = %v, want %v", tc.name, got, tc.want)
		}
		_ = c.Close(ctx)
	}
}

// TestTelemetrySendSeq: each message of a SendSeq gets its own publish span,
// a child of the caller's, with its own outcome, and its own count.
func TestTelemetrySendSeq(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newTelRig(t, url)
		nowhere := "acemq.tel.nowhere." + randomHex(4)
		ctx, app := r.tel.tp.Tracer("test").Start(context.Background(), "app")
		msgs := func(yield func(acemq.Outgoing[string]) bool) {
			for _, key := range []string{r.q, nowhere, r.q} {
				if !yield(acemq.Outgoing[string]{RoutingKey: key, Payload: "o"}) {
					return
				}
			}
		}
		err := acemq.NewPublisher[string](r.c, "").SendSeq(ctx, msgs, nil)
		app.End()
		var be *acemq.BatchError
		if !errors.As(err, &be) || be.Confirmed != 2 || be.Failed != 1 {
			t.Fatalf("SendSeq: %v", err)
		}
		r.checkPublishSpan(r.spanFor(nowhere+" publish", app.SpanContext()), nowhere, nowhere, "unroutable")
		if spans := r.tel.ended(r.q + " publish"); len(spans) != 2 {
			t.Fatalf("%d publish spans for %s, want 2", len(spans), r.q)
		} else {
			for _, s := range spans {
				r.checkPublishSpan(s, r.q, r.q, "confirmed")
				if s.Parent().SpanID() != app.SpanContext().SpanID() {
					t.Errorf("a SendSeq publish span's parent is %v, want the caller's span", s.Parent().SpanID())
				}
			}
		}
		r.wantCount("acemq.publish.total", map[string]string{"exchange": "", "routing.key": r.q, "outcome": "confirmed"}, 2)
		r.wantCount("acemq.publish.total", map[string]string{"exchange": "", "routing.key": nowhere, "outcome": "unroutable"}, 1)
	})
}
