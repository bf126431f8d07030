package saga_test

import (
	"context"
	"errors"
	"fmt"
	"testing"

	sdkmetric "go.opentelemetry.io/otel/sdk/metric"
	"go.opentelemetry.io/otel/sdk/metric/metricdata"

	"github.com/acemq/acemq/internal/storetest"
	"github.com/acemq/acemq/saga"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestMemoryLog(t *testing.T) {
	storetest.Saga(t, func(*testing.T) saga.Log { return saga.NewMemoryLog() })
}

func TestNewChecksItsSteps(t *testing.T) {
	l := saga.NewMemoryLog()
	for _, steps := range [][]saga.Step[int]{nil, {{Name: "a"}}, {{Do: nop}}, {{Name: "a", Do: nop}, {Name: "a", Do: nop}}} {
		if _, err := saga.New("s", l, steps).Run(t.Context(), "x", 0); err == nil {
			t.Errorf("steps %v accepted", steps)
		}
	}
}

func nop(context.Context, *int) error { return nil }

// An unresolved saga is counted, with the compensation that failed.
func TestMetrics(t *testing.T) {
	reader := sdkmetric.NewManualReader()
	mp := sdkmetric.NewMeterProvider(sdkmetric.WithReader(reader))
	fail := func(context.Context, *int) error { return errors.New("down") }
	s := saga.New("pay", saga.NewMemoryLog(), []saga.Step[int]{
		{Name: "reserve", Do: nop, Undo: fail},
		{Name: "charge", Do: fail},
	}, saga.WithMeterProvider(mp))
	if r, err := s.Run(t.Context(), "p1", 0); err != nil || r.State != saga.Unresolved {
		t.Fatalf("%+v, %v", r, err)
	}
	var rm metricdata.ResourceMetrics
	if err := reader.Collect(t.Context(), &rm); err != nil {
		t.Fatal(err)
	}
	got := map[string]string{}
	for _, sm := range rm.ScopeMetrics {
		for _, m := range sm.Metrics {
			for _, dp := range m.Data.(metricdata.Sum[int64]).DataPoints {
				attrs := ""
				for _, kv := range dp.Attributes.ToSlice() {
					attrs += string(kv.Key) + "=" + kv.Value.AsString() + " "
				}
				got[m.Name] = fmt.Sprintf("%s%d", attrs, dp.Value)
			}
		}
	}
	if got["acemq.saga.total"] != "saga=pay state=unresolved 1" || got["acemq.saga.compensation.failed"] != "saga=pay step=reserve 1" {
		t.Errorf("metrics %v", got)
	}
}
