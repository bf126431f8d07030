package actuator

import (
	"context"
	"fmt"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq"
)

// DefaultHealthTimeout bounds /acemq-health: a check that has not answered
// by then is down (docs/wire.md §12).
const DefaultHealthTimeout = 5 * time.Second

// HealthCheck is something that reports its health: an *acemq.Conn, or a
// function made one with HealthFunc.
type HealthCheck interface {
	Health(ctx context.Context) acemq.HealthReport
}

// HealthFunc adapts a function to a HealthCheck.
type HealthFunc func(ctx context.Context) acemq.HealthReport

// Health calls f.
func (f HealthFunc) Health(ctx context.Context) acemq.HealthReport { return f(ctx) }

type namedCheck struct {
	name string
	c    HealthCheck
}

// aggregate runs checks at once and reports the worst of them (down, then
// degraded, then up), within ctx and at most DefaultHealthTimeout. A check
// that has not answered by then is down. Parts maps each check's name to its
// own report, detail included; names given twice get "#2", "#3", ….
func aggregate(ctx context.Context, checks []namedCheck) acemq.HealthReport {
	ctx, cancel := context.WithTimeout(ctx, DefaultHealthTimeout)
	defer cancel()
	type result struct {
		i int
		r acemq.HealthReport
	}
	names := make([]string, len(checks))
	seen := map[string]int{}
	for i, ch := range checks {
		n := ch.name
		if seen[n]++; seen[n] > 1 {
			n += "#" + strconv.Itoa(seen[n])
		}
		names[i] = n
	}
	results := make(chan result, len(checks))
	for i, ch := range checks {
		go func() { results <- result{i, ch.c.Health(ctx)} }()
	}
	reports := make([]*acemq.HealthReport, len(checks))
collect:
	for range checks {
		select {
		case res := <-results:
			reports[res.i] = &res.r
		case <-ctx.Done():
			break collect
		}
	}
	now := time.Now().UTC()
	agg := acemq.HealthReport{Status: acemq.HealthUp, Checked: now, Parts: make(map[string]any, len(checks))}
	var bad []string
	for i, r := range reports {
		if r == nil {
			r = &acemq.HealthReport{Status: acemq.HealthDown, Checked: now,
				Detail: fmt.Sprintf("the check did not answer in time: %v", context.Cause(ctx))}
		}
		agg.Parts[names[i]] = *r
		if rank(r.Status) > rank(agg.Status) {
			agg.Status = r.Status
		}
		if r.Status != acemq.HealthUp {
			bad = append(bad, names[i]+" is "+string(r.Status)+": "+r.Detail)
		}
	}
	if len(bad) == 0 {
		agg.Detail = fmt.Sprintf("all %d checks are up", len(checks))
	} else {
		agg.Detail = strings.Join(bad, "; ")
	}
	return agg
}

func rank(s acemq.HealthStatus) int {
	switch s {
	case acemq.HealthUp:
		return 0
	case acemq.HealthDegraded:
		return 1
	}
	return 2 // down, and anything unknown
}
