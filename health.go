package acemq

import (
	"context"
	"database/sql/driver"
	"fmt"
	"sort"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq/internal/wire"
)

// HealthStatus is the state a health check reports.
type HealthStatus string

// The health statuses, from best to worst (docs/wire.md §11.5).
const (
	HealthUp       HealthStatus = "up"
	HealthDegraded HealthStatus = "degraded"
	HealthDown     HealthStatus = "down"
)

// defaultHealthTimeout bounds Conn.Health's broker probe when ctx has no
// deadline (docs/wire.md §12).
const defaultHealthTimeout = 3 * time.Second

// HealthReport is the result of a health check. Its JSON form is the
// family's: {"status", "detail", "checked", "parts"}.
type HealthReport struct {
	Status HealthStatus `json:"status"`
	// Detail says why, in a sentence for operators.
	Detail string `json:"detail"`
	// Checked is when the check ran.
	Checked time.Time `json:"checked"`
	// Parts holds the check's figures: for a connection, blocked,
	// blockedReason, consumers, roundTripMillis (null when the broker
	// was not probed), paused (the queues of paused consumers, by Pause
	// or their breaker), breakers (queue → breaker state, for consumers
	// with one) and endpoint (the URL of the node the connection is on,
	// without its password; "" while it is down); for an aggregate
	// (package actuator's), one
	// HealthReport per check.
	Parts map[string]any `json:"parts"`
}

// Health checks the connection within ctx, or 3 s when ctx
// has no deadline. It reports:
//
//   - down when the connection is closed or the broker does not answer a
//     ping (driver.Pinger, which creates nothing on the broker; with a
//     driver that cannot ping, the broker is not probed);
//   - up while the broker has blocked the connection, with the detail
//     contract.BlockedDetail + reason; the broker is not probed then, since a
//     blocked broker stops reading;
//   - degraded when a consumer's subscription ended without Close being
//     called (its queue was deleted, or the broker cancelled it), or when
//     a consumer's circuit breaker is open or half open;
//   - up otherwise.
//
// It does not detect a consumer whose handlers are stuck: use the
// acemq.consume.in.flight gauge and the settlement rate for that.
func (c *Conn) Health(ctx context.Context) HealthReport {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, defaultHealthTimeout)
		defer cancel()
	}
	blocked, reason := c.Blocked()
	c.mu.Lock()
	closed := c.closed
	running := 0
	var stopped []string
	paused := []string{}
	breakers := map[string]string{}
	var tripped []string
	for k := range c.consumers {
		if k.loop.Ended() {
			stopped = append(stopped, k.queue)
		} else {
			running++
		}
		if k.loop.Paused() {
			paused = append(paused, k.queue)
		}
		if k.loop.HasBreaker() {
			st := BreakerState(k.loop.BreakerState())
			breakers[k.queue] = string(st)
			if st != BreakerClosed {
				tripped = append(tripped, k.queue)
			}
		}
	}
	c.mu.Unlock()
	sort.Strings(stopped)
	sort.Strings(paused)
	sort.Strings(tripped)
	r := HealthReport{
		Checked: time.Now().UTC(),
		Parts: map[string]any{
			"blocked":         blocked,
			"blockedReason":   reason,
			"consumers":       running,
			"roundTripMillis": nil,
			"paused":          paused,
			"breakers":        breakers,
			"endpoint":        c.Endpoint(),
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
		r.Status, r.Detail = HealthUp, wire.BlockedDetail+reason
		return r
	}
	if p, ok := c.t.(driver.Pinger); ok {
		start := time.Now()
		if err := p.Ping(ctx); err != nil {
			r.Status = HealthDown
			at := c.Endpoint()
			if at == "" {
				at = c.url
			}
			r.Detail = fmt.Sprintf("the broker at %s did not answer a ping: %v", at, err)
			return r
		}
		r.Parts["roundTripMillis"] = float64(time.Since(start).Microseconds()) / 1000
	}
	if len(stopped) > 0 {
		r.Status = HealthDegraded
		r.Detail = fmt.Sprintf("the consumer of %s stopped unexpectedly (its queue was deleted or the broker cancelled it); %d consumers running", quoteAll(stopped), running)
		return r
	}
	if len(tripped) > 0 {
		r.Status = HealthDegraded
		r.Detail = fmt.Sprintf("the circuit breaker of the consumer of %s is not closed: it is paused after its handlers failed, and probes again after its cool-down; %d consumers running", quoteAll(tripped), running)
		return r
	}
	r.Status = HealthUp
	r.Detail = fmt.Sprintf("the broker answered; %d consumers running", running)
	if len(paused) > 0 {
		r.Detail += fmt.Sprintf(", of which %d paused (%s)", len(paused), quoteAll(paused))
	}
	return r
}

func quoteAll(qs []string) string {
	out := make([]string, len(qs))
	for i, q := range qs {
		out[i] = strconv.Quote(q)
	}
	return strings.Join(out, ", ")
}
