package actuator

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
)

func TestAggregate(t *testing.T) {
	up := HealthFunc(func(context.Context) acemq.HealthReport {
		return acemq.HealthReport{Status: acemq.HealthUp, Detail: "fine"}
	})
	degraded := HealthFunc(func(context.Context) acemq.HealthReport {
		return acemq.HealthReport{Status: acemq.HealthDegraded, Detail: "a consumer stopped"}
	})
	down := HealthFunc(func(context.Context) acemq.HealthReport {
		return acemq.HealthReport{Status: acemq.HealthDown, Detail: "no broker"}
	})
	hang := HealthFunc(func(ctx context.Context) acemq.HealthReport {
		<-ctx.Done()
		time.Sleep(10 * time.Millisecond) // answers late
		return acemq.HealthReport{Status: acemq.HealthUp}
	})
	ctx := context.Background()
	if r := aggregate(ctx, []namedCheck{{"a", up}, {"db", up}}); r.Status != acemq.HealthUp || r.Detail != "all 2 checks are up" {
		t.Errorf("all up: %+v", r)
	}
	r := aggregate(ctx, []namedCheck{{"a", up}, {"orders", degraded}})
	if r.Status != acemq.HealthDegraded || !strings.Contains(r.Detail, "orders is degraded: a consumer stopped") {
		t.Errorf("up+degraded: %+v", r)
	}
	if p, ok := r.Parts["orders"].(acemq.HealthReport); !ok || p.Detail != "a consumer stopped" {
		t.Errorf("the part's detail was not kept: %+v", r.Parts)
	}
	if r := aggregate(ctx, []namedCheck{{"x", degraded}, {"x", down}, {"y", up}}); r.Status != acemq.HealthDown || len(r.Parts) != 3 {
		t.Errorf("worst must win, and a name given twice is two parts: %+v", r)
	} else if _, ok := r.Parts["x#2"]; !ok {
		t.Errorf("the second x is not x#2: %+v", r.Parts)
	}
	tctx, cancel := context.WithTimeout(ctx, 50*time.Millisecond)
	defer cancel()
	r = aggregate(tctx, []namedCheck{{"a", up}, {"slow", hang}})
	if r.Status != acemq.HealthDown {
		t.Errorf("a check that does not answer: %+v", r)
	}
	if p := r.Parts["slow"].(acemq.HealthReport); p.Status != acemq.HealthDown || !strings.Contains(p.Detail, "did not answer in time") {
		t.Errorf("slow part %+v", p)
	}
}
