package acemq

import (
	"context"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"
)

// HealthStatus is the state a health check reports.
type HealthStatus string

// The health statuses, from best to worst (WIRE.md §11.5).
const (
	HealthUp       HealthStatus = "up"
	HealthDegraded HealthStatus = "degraded"
	HealthDown     HealthStatus = "down"
)

// Health deadlines (WIRE.md §12).
const (
	// DefaultHealthTimeout bounds Conn.Health's broker probe when ctx has
	// no deadline.
	DefaultHealthTimeout = 3 * time.Second
	// DefaultAggregateHealthTimeout bounds AggregateHealth.
	DefaultAggregateHealthTimeout = 5 * time.Second
)

// BlockedDetail starts the detail of a connection the broker has blocked;
// the broker's reason follows it (WIRE.md §11.3, fixed up to the colon).
const BlockedDetail = "the broker has blocked this connection; publishing is paused: "

// HealthReport is the result of a health check. Its JSON form is the
// family's: {"status", "detail", "checked", "parts"}.
type HealthReport struct {
	Status HealthStatus `json:"status"`
	// Detail says why, in a sentence for operators.
	Detail string `json:"detail"`
	// Checked is when the check ran.
	Checked time.Time `json:"checked"`
	// Parts holds the check's figures: for a connection, blocked,
	// blockedReason, consumers and roundTripMillis (null when the broker
	// was not probed); for AggregateHealth, one HealthReport per check.
	Parts map[string]any `json:"parts"`
}

// HealthCheck is something that reports its health: a *Conn, or a function
// made one with HealthFunc.
type HealthCheck interface {
	Health(ctx context.Context) HealthReport
}

// HealthFunc adapts a function to a HealthCheck.
type HealthFunc func(ctx context.Context) HealthReport

// Health calls f.
func (f HealthFunc) Health(ctx context.Context) HealthReport { return f(ctx) }

// NamedHealth names a check's part in AggregateHealth. Unnamed checks are
// parts named after the connection (its name, or its URL without the
// password) or "check-N".
func NamedHealth(name string, c HealthCheck) HealthCheck { return namedCheck{name, c} }

type namedCheck struct {
	name string
	c    HealthCheck
}

func (n namedCheck) Health(ctx context.Context) HealthReport { return n.c.Health(ctx) }

// Health checks the connection within ctx, or DefaultHealthTimeout when ctx
// has no deadline. It reports:
//
//   - down when the connection is closed or the broker does not answer a
//     ping (driver.Conn.Ping, which creates nothing on the broker);
//   - up while the broker has blocked the connection, with the detail
//     BlockedDetail + reason; the broker is not probed then, since a
//     blocked broker stops reading;
//   - degraded when a consumer's subscription ended without Close being
//     called (its queue was deleted, or the broker cancelled it);
//   - up otherwise.
//
// It does not detect a consumer whose handlers are stuck: use the
// acemq.consume.in.flight gauge and the settlement rate for that.
func (c *Conn) Health(ctx context.Context) HealthReport {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, DefaultHealthTimeout)
		defer cancel()
	}
	blocked, reason := c.t.Blocked()
	c.mu.Lock()
	closed := c.closed
	running := 0
	var stopped []string
	for k := range c.consumers {
		if k.ended.Load() {
			stopped = append(stopped, k.queue)
		} else {
			running++
		}
	}
	c.mu.Unlock()
	sort.Strings(stopped)
	r := HealthReport{
		Checked: time.Now().UTC(),
		Parts: map[string]any{
			"blocked":         blocked,
			"blockedReason":   reason,
			"consumers":       running,
			"roundTripMillis": nil,
		},
	}
	switch {
	case closed:
		r.Status, r.Detail = HealthDown, "the connection is closed"
		return r
	case blocked:
		if reason == "" {
			reason = "(the broker gave no reason)"
		}
		r.Status, r.Detail = HealthUp, BlockedDetail+reason
		return r
	}
	start := time.Now()
	if err := c.t.Ping(ctx); err != nil {
		r.Status = HealthDown
		r.Detail = fmt.Sprintf("the broker at %s did not answer a ping: %v", c.url, err)
		return r
	}
	r.Parts["roundTripMillis"] = float64(time.Since(start).Microseconds()) / 1000
	if len(stopped) > 0 {
		r.Status = HealthDegraded
		r.Detail = fmt.Sprintf("the consumer of %s stopped unexpectedly (its queue was deleted or the broker cancelled it); %d consumers running", quoteAll(stopped), running)
		return r
	}
	r.Status = HealthUp
	r.Detail = fmt.Sprintf("the broker answered; %d consumers running", running)
	return r
}

func (c *Conn) healthName() string {
	if c.name != "" {
		return c.name
	}
	return c.url
}

func quoteAll(qs []string) string {
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = strconv.Quote(q)
	}
	return strings.Join(out, ", ")
}

// AggregateHealth runs checks at once and reports the worst of them (down,
// then degraded, then up), within ctx and at most
// DefaultAggregateHealthTimeout. A check that has not answered by then is
// down. Parts maps each check's name to its own report, detail included.
// With no checks it reports up.
func AggregateHealth(ctx context.Context, checks ...HealthCheck) HealthReport {
	ctx, cancel := context.WithTimeout(ctx, DefaultAggregateHealthTimeout)
	defer cancel()
	type result struct {
		i int
		r HealthReport
	}
	names := make([]string, len(checks))
	seen := map[string]int{}
	for i, ch := range checks {
		n := checkName(ch, i)
		if seen[n]++; seen[n] > 1 {
			n += "#" + strconv.Itoa(seen[n])
		}
		names[i] = n
	}
	results := make(chan result, len(checks))
	for i, ch := range checks {
		go func() { results <- result{i, ch.Health(ctx)} }()
	}
	reports := make([]*HealthReport, len(checks))
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
	agg := HealthReport{Status: HealthUp, Checked: now, Parts: make(map[string]any, len(checks))}
	var bad []string
	for i, r := range reports {
		if r == nil {
			r = &HealthReport{Status: HealthDown, Checked: now,
				Detail: fmt.Sprintf("the check did not answer in time: %v", context.Cause(ctx))}
		}
		agg.Parts[names[i]] = *r
		if rank(r.Status) > rank(agg.Status) {
			agg.Status = r.Status
		}
		if r.Status != HealthUp {
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

func checkName(ch HealthCheck, i int) string {
	switch c := ch.(type) {
	case namedCheck:
		return c.name
	case *Conn:
		return c.healthName()
	}
	return "check-" + strconv.Itoa(i+1)
}

func rank(s HealthStatus) int {
	switch s {
	case HealthUp:
		return 0
	case HealthDegraded:
		return 1
	}
	return 2 // down, and anything unknown
}
