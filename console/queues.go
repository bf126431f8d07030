package console

import (
	"context"
	"errors"
	"sort"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/rpc"
	"github.com/acemq/acemq/topology"
)

// Roles of a queue in the list.
const (
	roleApp    = "queue"
	roleDLQ    = "dlq"
	roleParked = "parked"
	roleRung   = "rung"
)

// queueRow is one queue in the list, as the API sends it.
type queueRow struct {
	Name      string `json:"name"`
	Role      string `json:"role"`
	Type      string `json:"type,omitempty"`
	Exists    bool   `json:"exists"`
	Messages  int    `json:"messages"`
	Unacked   int    `json:"unacked"`
	Consumers int    `json:"consumers"`
	// Rates are messages a second, from the management API only.
	PublishRate *float64 `json:"publishRate,omitempty"`
	DeliverRate *float64 `json:"deliverRate,omitempty"`
}

// queueGroup is an application queue with its dead-letter half and rungs.
type queueGroup struct {
	queueRow
	DLQ    *queueRow  `json:"dlq,omitempty"`
	Parked *queueRow  `json:"parked,omitempty"`
	Rungs  []queueRow `json:"rungs,omitempty"`
	// DeadLetters is the messages in the dead-letter half and parking
	// queue together.
	DeadLetters int `json:"deadLetters"`
}

// queueList is GET /api/queues.
type queueList struct {
	Broker string       `json:"broker"`
	Source string       `json:"source"` // "management" or "named"
	Error  string       `json:"error,omitempty"`
	Queues []queueGroup `json:"queues"`
}

// roleOf splits a queue name into its application queue and role.
func roleOf(name string) (base, role string) {
	if b, ok := strings.CutSuffix(name, ".dlq"); ok && b != "" {
		return b, roleDLQ
	}
	if b, ok := strings.CutSuffix(name, ".parked"); ok && b != "" {
		return b, roleParked
	}
	if i := strings.LastIndex(name, ".retry."); i > 0 && i+len(".retry.") < len(name) {
		return name[:i], roleRung
	}
	return name, roleApp
}

// group arranges rows into application queues with their halves, sorted by
// dead letters (most first), then name.
func group(rows []queueRow) []queueGroup {
	byBase := map[string]*queueGroup{}
	var order []string
	get := func(base string) *queueGroup {
		g, ok := byBase[base]
		if !ok {
			g = &queueGroup{queueRow: queueRow{Name: base, Role: roleApp}}
			byBase[base] = g
			order = append(order, base)
		}
		return g
	}
	for _, r := range rows {
		base, role := roleOf(r.Name)
		r.Role = role
		g := get(base)
		switch role {
		case roleApp:
			g.queueRow = r
		case roleDLQ:
			g.DLQ = &r
			g.DeadLetters += r.Messages
		case roleParked:
			g.Parked = &r
			g.DeadLetters += r.Messages
		case roleRung:
			g.Rungs = append(g.Rungs, r)
		}
	}
	out := make([]queueGroup, 0, len(order))
	for _, b := range order {
		g := byBase[b]
		sort.Slice(g.Rungs, func(i, j int) bool { return g.Rungs[i].Name < g.Rungs[j].Name })
		out = append(out, *g)
	}
	sort.SliceStable(out, func(i, j int) bool {
		if out[i].DeadLetters != out[j].DeadLetters {
			return out[i].DeadLetters > out[j].DeadLetters
		}
		return out[i].Name < out[j].Name
	})
	return out
}

// listQueues lists the queues: from the management API when configured
// (falling back to the named queues, with the API's error, when it fails),
// else the named ones.
func (c *Console) listQueues(ctx context.Context) queueList {
	l := queueList{Broker: c.conn.URL(), Source: "named"}
	if c.mgmt != nil {
		qs, err := c.mgmt.Queues(ctx)
		if err == nil {
			l.Source = "management"
			rows := make([]queueRow, 0, len(qs))
			for _, q := range qs {
				if strings.HasPrefix(q.Name, "amq.") || strings.HasPrefix(q.Name, rpc.ReplyQueuePrefix) {
					continue // server-named, and requesters' reply queues
				}
				pr, dr := q.MessageStats.Publish.Rate, q.MessageStats.DeliverGet.Rate
				rows = append(rows, queueRow{Name: q.Name, Type: q.Type, Exists: true, Messages: q.Ready, Unacked: q.Unacked, Consumers: q.Consumers, PublishRate: &pr, DeliverRate: &dr})
			}
			l.Queues = group(rows)
			return l
		}
		l.Error = "console: " + err.Error()
	}
	// Under the lock, so that a look at a queue in progress, which holds
	// its messages, does not show as an empty queue.
	c.mu.Lock()
	rows := c.inspectNamed(ctx)
	c.mu.Unlock()
	l.Queues = group(rows)
	return l
}

// named is the application queues and rungs WithQueues and WithTopology
// name, each once, in order, with their halves.
func (c *Console) named() []string {
	seen := map[string]bool{}
	var names []string
	add := func(n string) {
		if n != "" && !seen[n] {
			seen[n] = true
			names = append(names, n)
		}
	}
	addApp := func(q string) {
		add(q)
		add(contract.DeadLetterQueue(q))
		add(contract.ParkedQueue(q))
	}
	for _, q := range c.cfg.queues {
		base, _ := roleOf(q)
		addApp(base)
	}
	for _, t := range c.cfg.topology {
		plan, _ := t.Plan() // validated by New
		for _, d := range plan {
			if d.Kind != topology.QueueDeclaration {
				continue
			}
			base, role := roleOf(d.Queue.Name)
			addApp(base)
			if role == roleRung {
				add(d.Queue.Name)
			}
		}
	}
	return names
}

// inspectNamed inspects every named queue; a dead-letter half or rung that
// does not exist is left out, an application queue that does not is shown
// as missing.
func (c *Console) inspectNamed(ctx context.Context) []queueRow {
	var rows []queueRow
	for _, n := range c.named() {
		info, err := queues.Inspect(ctx, c.conn, n)
		_, role := roleOf(n)
		switch {
		case err == nil:
			rows = append(rows, queueRow{Name: n, Exists: true, Messages: info.Messages, Consumers: info.Consumers})
		case errors.Is(err, acemq.ErrNotFound) && role != roleApp:
			// no dead-letter half: nothing to show
		default:
			rows = append(rows, queueRow{Name: n})
		}
	}
	return rows
}
