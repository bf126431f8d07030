package rpc_test

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/rpc"
	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/sdk/trace/tracetest"
	"go.opentelemetry.io/otel/trace"
)

type observed struct {
	reader *sdkmetric.ManualReader
	spans  *tracetest.SpanRecorder
}

func observe(t *testing.T) (observed, []acemq.ConnOption) {
	o := observed{reader: sdkmetric.NewManualReader(), spans: tracetest.NewSpanRecorder()}
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))
	tp := sdktrace.NewTracerProvider(sdktrace.WithSpanProcessor(o.spans))
	t.Cleanup(func() {
		_ = mp.Shutdown(context.Background())
		_ = tp.Shutdown(context.Background())
	})
	return o, []acemq.ConnOption{acemq.WithMeterProvider(mp), acemq.WithTracerProvider(tp)}
}

func (o observed) metrics(t *testing.T) map[string]metricdata.Metrics {
	t.Helper()
	var rm metricdata.ResourceMetrics
	if err := o.reader.Collect(context.Background(), &rm); err != nil {
		t.Fatal(err)
	}
	out := map[string]metricdata.Metrics{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			if sm.Scope.Name == telemetry.Scope {
				out[m.Name] = m
			}
		}
	}
	return out
}

func attrs(set attribute.Set) map[string]string {
	out := map[string]string{}
	for _, kv := range set.ToSlice() {
		out[string(kv.Key)] = kv.Value.String()
	}
	return out
}

// 8. acemq.request.total and acemq.request.duration, written by the caller
// only, tagged routing.key and outcome; a CLIENT span per call.
func TestRequestMetricsAndSpans(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		caller, callerOpts := observe(t)
		callee, calleeOpts := observe(t)
		conn := e.connect(callerOpts...)
		serverConn := e.connect(calleeOpts...)

		prices := e.queue("prices")
		serve(t, serverConn, prices, func(ctx context.Context, m acemq.Message[priceRequest]) (quote, error) {
			if m.Payload.SKU == "fail" {
				return quote{}, errors.New("nope")
			}
			return price(ctx, m)
		})
		if err := brokertest.Driver(e.admin).Bind(bg, driver.Binding{Queue: prices, Exchange: "amq.direct", RoutingKey: prices}); err != nil {
			t.Fatal(err)
		}
		silent := e.queue("silent")
		missing := "missing-" + silent

		direct := open[priceRequest, quote](t, conn, "", prices)
		viaExchange := open[priceRequest, quote](t, conn, "amq.direct", prices)
		slow := open[priceRequest, quote](t, conn, "", silent, rpc.WithTimeout(30*time.Millisecond))
		nowhere := open[priceRequest, quote](t, conn, "", missing)

		if _, err := direct.Ask(bg, priceRequest{SKU: "A"}); err != nil {
			t.Fatal(err)
		}
		var re *rpc.ResponderError
		if _, err := direct.Ask(bg, priceRequest{SKU: "fail"}); !errors.As(err, &re) {
			t.Fatal(err)
		}
		if _, err := viaExchange.Ask(bg, priceRequest{SKU: "A"}); err != nil {
			t.Fatal(err)
		}
		if _, err := slow.Ask(bg, priceRequest{SKU: "A"}); !errors.Is(err, rpc.ErrTimeout) {
			t.Fatal(err)
		}
		if _, err := nowhere.Ask(bg, priceRequest{SKU: "A"}); err == nil {
			t.Fatal("an unroutable request succeeded")
		}

		ms := caller.metrics(t)
		total, ok := ms["acemq.request.total"].Data.(metricdata.Sum[int64])
		if !ok || !total.IsMonotonic {
			t.Fatalf("acemq.request.total is not a monotonic int64 counter: %#v", ms["acemq.request.total"])
		}
		counts := map[[2]string]int64{}
		for _, dp := range total.DataPoints {
			a := attrs(dp.Attributes)
			if len(a) != 2 {
				t.Fatalf("acemq.request.total attributes %v; want routing.key and outcome only", a)
			}
			counts[[2]string{a["routing.key"], a["outcome"]}] += dp.Value
		}
		want := map[[2]string]int64{
			{prices, "answered"}:  3,
			{silent, "timed_out"}: 1,
			{missing, "failed"}:   1,
		}
		for k, v := range want {
			if counts[k] != v {
				t.Errorf("acemq.request.total%v = %d, want %d (all: %v)", k, counts[k], v, counts)
			}
		}
		if len(counts) != len(want) {
			t.Errorf("unexpected series: %v", counts)
		}

		dm := ms["acemq.request.duration"]
		if dm.Unit != "s" {
			t.Fatalf("acemq.request.duration unit %q, want s", dm.Unit)
		}
		hist, ok := dm.Data.(metricdata.Histogram[float64])
		if !ok {
			t.Fatalf("acemq.request.duration is not a float64 histogram: %#v", dm.Data)
		}
		var observedCalls uint64
		for _, dp := range hist.DataPoints {
			a := attrs(dp.Attributes)
			observedCalls += dp.Count
			if a["outcome"] == "timed_out" && dp.Sum < 0.030 {
				t.Errorf("a timed-out call was recorded at %.3fs, before its 30ms deadline", dp.Sum)
			}
		}
		if observedCalls != 5 {
			t.Errorf("acemq.request.duration observed %d calls, want 5", observedCalls)
		}

		for name := range callee.metrics(t) {
			if name == "acemq.request.total" || name == "acemq.request.duration" {
				t.Errorf("the responder's connection wrote %s", name)
			}
		}

		var requestSpans []sdktrace.ReadOnlySpan
		for _, s := range caller.spans.Ended() {
			if s.SpanKind() == trace.SpanKindClient {
				requestSpans = append(requestSpans, s)
			}
		}
		if len(requestSpans) != 5 {
			t.Fatalf("%d CLIENT spans, want 5", len(requestSpans))
		}
		// The request's publish runs inside the request span: the
		// connection's PRODUCER span is its child.
		parents := map[trace.SpanID]bool{}
		for _, s := range caller.spans.Ended() {
			if s.SpanKind() == trace.SpanKindProducer {
				parents[s.Parent().SpanID()] = true
			}
		}
		outcomes := map[string]int{}
		for _, s := range requestSpans {
			if !parents[s.SpanContext().SpanID()] {
				t.Errorf("the request span %s has no publish span under it", s.Name())
			}
			a := attrs(attribute.NewSet(s.Attributes()...))
			outcome := a["messaging.acemq.outcome"]
			outcomes[s.Name()+" "+outcome]++
			if s.InstrumentationScope().Name != "org.acemq.amqp" {
				t.Errorf("span scope %q", s.InstrumentationScope().Name)
			}
			if a["messaging.system"] != "rabbitmq" || a["messaging.operation"] != "request" {
				t.Errorf("span %s attributes %v", s.Name(), a)
			}
			if a["messaging.message.id"] == "" || a["messaging.message.conversation_id"] != a["messaging.message.id"] {
				t.Errorf("span %s id %q conversation %q", s.Name(), a["messaging.message.id"], a["messaging.message.conversation_id"])
			}
			dest := a["messaging.destination.name"]
			if s.Name() != dest+" request" {
				t.Errorf("span %q for destination %q", s.Name(), dest)
			}
			wantErr := outcome == "timed_out" || outcome == "failed"
			if (s.Status().Code == codes.Error) != wantErr {
				t.Errorf("span %s outcome %s has status %v", s.Name(), outcome, s.Status())
			}
		}
		wantSpans := map[string]int{
			prices + " request answered":  2,
			"amq.direct request answered": 1,
			silent + " request timed_out": 1,
			missing + " request failed":   1,
		}
		for k, v := range wantSpans {
			if outcomes[k] != v {
				t.Errorf("spans %q: %d, want %d (all: %v)", k, outcomes[k], v, outcomes)
			}
		}
	})
}

// Without tracing (a meter provider and no tracer provider: the global one,
// with no SDK installed) a requester builds no span and still records its
// metrics.
func TestRequestMetricsWithoutTracing(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		o := observed{reader: sdkmetric.NewManualReader()}
		mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(o.reader))
		t.Cleanup(func() { _ = mp.Shutdown(context.Background()) })
		conn := e.connect(acemq.WithMeterProvider(mp))
		if brokertest.Tracing(conn) {
			t.Fatal("a connection without a tracer provider says it traces")
		}
		prices := e.queue("prices")
		serve(t, e.connect(), prices, price)
		r := open[priceRequest, quote](t, conn, "", prices)
		for range 3 {
			if _, err := r.Ask(bg, priceRequest{SKU: "A"}); err != nil {
				t.Fatal(err)
			}
		}
		total, ok := o.metrics(t)["acemq.request.total"].Data.(metricdata.Sum[int64])
		if !ok || len(total.DataPoints) != 1 {
			t.Fatalf("acemq.request.total: %#v", total)
		}
		dp := total.DataPoints[0]
		if a := attrs(dp.Attributes); dp.Value != 3 || a["outcome"] != "answered" || a["routing.key"] != prices {
			t.Errorf("acemq.request.total = %d %v, want 3 answered calls to %s", dp.Value, a, prices)
		}
	})
}

// Generated reply queues are one per requester: replies to them, and the
// reply consumers' own deliveries, are tagged acemq-reply-* in metrics, so
// callers that come and go do not add series to a responder for good.
func TestReplyQueuesShareMetricSeries(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		callee, calleeOpts := observe(t)
		caller, callerOpts := observe(t)
		prices := e.queue("prices")
		serve(t, e.connect(calleeOpts...), prices, price)
		conn := e.connect(callerOpts...)
		for range 3 {
			r := open[priceRequest, quote](t, conn, "", prices)
			if _, err := r.Ask(bg, priceRequest{SKU: "A"}); err != nil {
				t.Fatal(err)
			}
		}

		// The responder records a reply's publish once its confirm is in,
		// which can be after the caller has the reply: wait for the third.
		var published metricdata.Sum[int64]
		testenv.Eventually(t, "three replies published", func() bool {
			published, _ = callee.metrics(t)["acemq.publish.total"].Data.(metricdata.Sum[int64])
			var n int64
			for _, dp := range published.DataPoints {
				if a := attrs(dp.Attributes); a["exchange"] == "" && a["routing.key"] != prices {
					n += dp.Value
				}
			}
			return n == 3
		})
		var replies []map[string]string
		for _, dp := range published.DataPoints {
			a := attrs(dp.Attributes)
			if a["exchange"] == "" && a["routing.key"] != prices {
				replies = append(replies, a)
				if a["routing.key"] != "acemq-reply-*" || dp.Value != 3 {
					t.Errorf("reply series %v = %d, want routing.key acemq-reply-* = 3", a, dp.Value)
				}
			}
		}
		if len(replies) != 1 {
			t.Errorf("the replies to three requesters make %d series, want 1: %v", len(replies), replies)
		}

		// A reply consumer records its settlement after the call has its
		// answer: wait for the third.
		var consumed metricdata.Sum[int64]
		testenv.Eventually(t, "three replies counted", func() bool {
			consumed, _ = caller.metrics(t)["acemq.consume.total"].Data.(metricdata.Sum[int64])
			var n int64
			for _, dp := range consumed.DataPoints {
				n += dp.Value
			}
			return n == 3
		})
		for _, dp := range consumed.DataPoints {
			if a := attrs(dp.Attributes); a["queue"] != "acemq-reply-*" || dp.Value != 3 {
				t.Errorf("reply consumer series %v = %d, want queue acemq-reply-* = 3", a, dp.Value)
			}
		}
		if len(consumed.DataPoints) != 1 {
			t.Errorf("three reply consumers make %d series, want 1", len(consumed.DataPoints))
		}
	})
}
