package console

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/claimcheck"
	"github.com/acemq/acemq/queues"
)

// A BodyDecoder turns a message's body as it travelled into what the
// console shows: for example, decrypts it. It returns the body and its
// content type; ok false leaves the body as it is (not for this decoder). A
// decoder is given the message as read; it must not keep it.
type BodyDecoder func(m acemq.Message[[]byte]) (body []byte, contentType string, ok bool, err error)

// look reads up to the peek limit of queue's messages, one at a time,
// gives each to f, and puts every one back (Browser.Close), so nothing is
// taken. It keeps nothing of a message itself: what f keeps is what the
// look costs. truncated says the queue held more than the peek limit. The
// caller holds c.mu.
func (c *Console) look(ctx context.Context, queue string, f func(m acemq.Message[[]byte]) (more bool, err error)) (truncated bool, err error) {
	b, err := queues.Browse(ctx, c.conn, queue)
	if err != nil {
		return false, err
	}
	defer b.Close()
	n := 0
	err = each(ctx, b, func(m queues.Message) (bool, error) {
		if n == c.cfg.peekLimit {
			truncated = true
			return false, nil
		}
		n++
		return f(m.Message)
	})
	return truncated, err
}

// each reads b's messages one at a time and gives each to f, until f says
// no more, fails, or the queue has no more ready messages. What f does not
// take stays held by b until it closes.
func each(ctx context.Context, b *queues.Browser, f func(m queues.Message) (more bool, err error)) error {
	if readHook != nil {
		defer readHook()
	}
	for {
		if readHook != nil {
			readHook()
		}
		m, ok, err := b.Next(ctx)
		if err != nil || !ok {
			return err
		}
		if more, err := f(m); err != nil || !more {
			return err
		}
	}
}

// readHook, when set (by a test), is called before each message a read
// of a queue takes.
var readHook func()

// messageSummary is a message in a group's list.
type messageSummary struct {
	ID          string     `json:"id"`
	Type        string     `json:"type"`
	Attempt     int        `json:"attempt"`
	Reason      string     `json:"reason"`
	RoutingKey  string     `json:"routingKey"`
	ContentType string     `json:"contentType"`
	Size        int        `json:"size"`
	FirstSeen   *time.Time `json:"firstSeen,omitempty"`
	// DeadAt is when the broker dead-lettered it (x-death); Seen is that,
	// else its first-seen time: what a group's first and last are made of.
	DeadAt      *time.Time `json:"deadLetteredAt,omitempty"`
	Seen        *time.Time `json:"seen,omitempty"`
	Redelivered bool       `json:"redelivered"`
}

// reasonGroup is dead letters with one group key.
type reasonGroup struct {
	ID       string           `json:"id"`
	Key      string           `json:"key"`
	Example  string           `json:"example"`
	Count    int              `json:"count"`
	First    *time.Time       `json:"firstSeen,omitempty"`
	Last     *time.Time       `json:"lastSeen,omitempty"`
	Types    []string         `json:"types"`
	Messages []messageSummary `json:"messages"`
}

// queueView is GET /api/queues/NAME.
type queueView struct {
	Queue     string `json:"queue"`
	Role      string `json:"role"`
	Target    string `json:"target,omitempty"` // where replay sends them
	Actions   bool   `json:"actions"`          // replay and delete offered
	Peeked    int    `json:"peeked"`
	Truncated bool   `json:"truncated"`
	PeekLimit int    `json:"peekLimit"`
	// BudgetReached says the look stopped at the peek budget (Truncated is
	// then true too): the summaries of the messages read filled it.
	BudgetReached bool          `json:"budgetReached"`
	PeekBudget    int           `json:"peekBudget"`
	Groups        []reasonGroup `json:"groups"`
	ReadAt        time.Time     `json:"readAt"`
	QueueDepth    int           `json:"depth"`
}

// when is when a dead letter was last seen failing, as near as its
// headers tell: its newest x-death entry's time (docs/wire.md §3.4) when the broker
// dead-lettered it (expiry, a rejection by another consumer), else its
// first-seen time (the library's own set-asides to .dlq and .parked carry
// no time of their own).
func when(env acemq.Envelope) *time.Time {
	if t, ok := deathTime(env); ok {
		return &t
	}
	if _, ok := env.Age(); ok {
		t := env.FirstSeen()
		return &t
	}
	return nil
}

// deathTime reads x-death[0].time.
func deathTime(env acemq.Envelope) (time.Time, bool) {
	v, ok := env.Header("x-death")
	if !ok {
		return time.Time{}, false
	}
	list, ok := v.([]any)
	if !ok || len(list) == 0 {
		return time.Time{}, false
	}
	var t any
	switch e := list[0].(type) {
	case map[string]any:
		t = e["time"]
	default:
		return time.Time{}, false
	}
	tt, ok := t.(time.Time)
	return tt, ok && !tt.IsZero()
}

// The most of a message's reason, type, routing key and content type a
// summary keeps: the message's page shows all of them.
const (
	maxSummaryReason = 1024
	maxSummaryField  = 256
)

// summaryOverhead is what a summary costs beyond its strings: its fixed
// fields and its share of the slice and of the JSON answer.
const summaryOverhead = 256

func summarise(m acemq.Message[[]byte]) messageSummary {
	env := m.Envelope
	s := messageSummary{ID: env.ID(), Type: cut(env.Type(), maxSummaryField), Attempt: env.Attempt(), Reason: cut(env.Reason(), maxSummaryReason), RoutingKey: cut(m.RoutingKey, maxSummaryField), ContentType: cut(m.ContentType, maxSummaryField), Size: len(m.Body), Redelivered: m.Redelivered, Seen: when(env)}
	if t, ok := deathTime(env); ok {
		s.DeadAt = &t
	}
	if _, ok := env.Age(); ok {
		t := env.FirstSeen()
		s.FirstSeen = &t
	}
	return s
}

// cost is what a summary holds in memory, as the budget counts it.
func (s messageSummary) cost() int {
	return summaryOverhead + len(s.ID) + len(s.Type) + len(s.Reason) + len(s.RoutingKey) + len(s.ContentType)
}

// cut shortens s to at most n bytes, at a character boundary, marking the
// cut with "…".
func cut(s string, n int) string {
	if len(s) <= n {
		return s
	}
	i := n - len("…")
	for i > 0 && !utf8.RuneStart(s[i]) {
		i--
	}
	return s[:i] + "…"
}

// grouper groups messages by GroupKey as a look reads them, keeping a
// summary of each (never its body) within a budget of bytes.
type grouper struct {
	budget int
	used   int
	full   bool // a message was left out for the budget
	n      int
	byKey  map[string]*reasonGroup
	order  []string
	types  map[string]map[string]bool
}

func newGrouper(budget int) *grouper {
	return &grouper{budget: budget, byKey: map[string]*reasonGroup{}, types: map[string]map[string]bool{}}
}

// add summarises m into its group; it says no more when the budget is
// spent (m is then left out).
func (g *grouper) add(m acemq.Message[[]byte]) (bool, error) {
	s := summarise(m)
	key := GroupKey(m.Envelope.Reason())
	cost := s.cost()
	gr, ok := g.byKey[key]
	if !ok {
		shown := cut(key, maxSummaryReason)
		cost += summaryOverhead + len(shown) + len(s.Reason)
		gr = &reasonGroup{ID: groupID(key), Key: shown, Example: s.Reason}
	}
	newType := !ok || !g.types[key][s.Type]
	if newType {
		cost += len(s.Type)
	}
	if g.used+cost > g.budget {
		g.full = true
		return false, nil
	}
	g.used += cost
	g.n++
	if !ok {
		g.byKey[key] = gr
		g.order = append(g.order, key)
		g.types[key] = map[string]bool{}
	}
	gr.Count++
	gr.Messages = append(gr.Messages, s)
	if t := s.Seen; t != nil {
		if gr.First == nil || t.Before(*gr.First) {
			gr.First = t
		}
		if gr.Last == nil || t.After(*gr.Last) {
			gr.Last = t
		}
	}
	if newType {
		g.types[key][s.Type] = true
		gr.Types = append(gr.Types, s.Type)
	}
	return true, nil
}

// groups are the groups, largest first.
func (g *grouper) groups() []reasonGroup {
	out := make([]reasonGroup, 0, len(g.order))
	for _, k := range g.order {
		out = append(out, *g.byKey[k])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Count > out[j].Count })
	return out
}

// view is GET /api/queues/NAME: the queue's messages, peeked, grouped.
func (c *Console) view(ctx context.Context, queue string) (queueView, error) {
	g := newGrouper(c.cfg.peekBudget)
	c.mu.Lock()
	truncated, err := c.look(ctx, queue, g.add)
	var depth int
	if err == nil {
		if info, ierr := queues.Inspect(ctx, c.conn, queue); ierr == nil {
			depth = info.Messages
		}
	}
	c.mu.Unlock()
	if err != nil {
		return queueView{}, err
	}
	// The broker may count the put-back messages a moment later than it
	// answers.
	depth = max(depth, g.n)
	_, role := roleOf(queue)
	v := queueView{Queue: queue, Role: role, Peeked: g.n, Truncated: truncated || g.full, BudgetReached: g.full, PeekLimit: c.cfg.peekLimit, PeekBudget: c.cfg.peekBudget, Groups: g.groups(), ReadAt: time.Now().UTC()}
	if t, ok := replayTarget(queue); ok {
		v.Target, v.Actions = t, true
	}
	v.QueueDepth = depth
	return v, nil
}

// messageDetail is GET /api/queues/NAME/messages/ID.
type messageDetail struct {
	Queue       string          `json:"queue"`
	Group       string          `json:"group"`
	GroupKey    string          `json:"groupKey"`
	Envelope    json.RawMessage `json:"envelope"`
	Age         string          `json:"age,omitempty"`
	DeadAt      *time.Time      `json:"deadLetteredAt,omitempty"`
	Exchange    string          `json:"exchange"`
	RoutingKey  string          `json:"routingKey"`
	ContentType string          `json:"contentType"`
	ReplyTo     string          `json:"replyTo,omitempty"`
	Redelivered bool            `json:"redelivered"`
	Size        int             `json:"size"`
	ClaimKey    string          `json:"claimCheckKey,omitempty"`
	ClaimInline bool            `json:"claimCheckInline,omitempty"`
	Decoded     bool            `json:"decoded,omitempty"` // by the body decoder
	DecodeError string          `json:"decodeError,omitempty"`
	BodyKind    string          `json:"bodyKind"` // json, text, binary
	// BodyCut says the body was longer than maxShownBody and only its start
	// is shown (export has all of it).
	BodyCut    bool   `json:"bodyCut,omitempty"`
	Body       string `json:"body"` // text, indented JSON, or base64
	Duplicates int    `json:"duplicates,omitempty"`
}

// detail peeks queue for the message with id. It keeps the first message
// with that id (the one body it holds) and counts the others.
func (c *Console) detail(ctx context.Context, queue, id string) (messageDetail, bool, error) {
	var found acemq.Message[[]byte]
	ok, dups := false, 0
	c.mu.Lock()
	_, err := c.look(ctx, queue, func(m acemq.Message[[]byte]) (bool, error) {
		switch {
		case m.Envelope.ID() != id:
		case ok:
			dups++
		default:
			found, ok = m, true
		}
		return true, nil
	})
	c.mu.Unlock()
	if err != nil || !ok {
		return messageDetail{}, false, err
	}
	d, err := c.describe(found)
	d.Queue, d.Duplicates = queue, dups
	return d, true, err
}

// describe renders a message for the detail view.
func (c *Console) describe(m acemq.Message[[]byte]) (messageDetail, error) {
	env := m.Envelope
	ej, err := env.MarshalJSON()
	if err != nil {
		return messageDetail{}, err
	}
	key := GroupKey(env.Reason())
	d := messageDetail{Group: groupID(key), GroupKey: key, Envelope: ej, Exchange: m.Exchange, RoutingKey: m.RoutingKey, ContentType: m.ContentType, ReplyTo: m.ReplyTo, Redelivered: m.Redelivered, Size: len(m.Body)}
	if t, ok := deathTime(env); ok {
		d.DeadAt = &t
	}
	if age, ok := env.Age(); ok {
		d.Age = age.Round(time.Second).String()
	}
	body, ct := m.Body, m.ContentType
	if c.cfg.decoder != nil {
		b, t, ok, err := c.cfg.decoder(m)
		switch {
		case err != nil:
			d.DecodeError = err.Error()
		case ok:
			body, ct, d.Decoded = b, t, true
		}
	}
	if k, ok := claimcheck.KeyOf(body); ok {
		d.ClaimKey = k
	} else if claimcheck.IsFramed(body) && len(body) >= 3 {
		d.ClaimInline, body = true, body[3:]
	}
	if len(body) > maxShownBody {
		body, d.BodyCut = body[:maxShownBody], true
	}
	d.BodyKind, d.Body = renderBody(body, ct)
	return d, nil
}

// maxShownBody is the most of a body the message view shows.
const maxShownBody = 1 << 20

// renderBody shows a body by its content type: JSON indented, text as it
// is, anything else (or anything not UTF-8) in base64.
func renderBody(body []byte, contentType string) (kind, text string) {
	mt, _, _ := mime.ParseMediaType(contentType)
	isJSON := mt == "application/json" || strings.HasSuffix(mt, "+json")
	if isJSON && json.Valid(body) {
		var v any
		dec := json.NewDecoder(strings.NewReader(string(body)))
		dec.UseNumber()
		if dec.Decode(&v) == nil {
			if b, err := json.MarshalIndent(v, "", "  "); err == nil {
				return "json", string(b)
			}
		}
	}
	textual := isJSON || strings.HasPrefix(mt, "text/") || mt == "application/xml" || strings.HasSuffix(mt, "+xml") || mt == "application/yaml" || mt == "application/toml" || mt == ""
	if textual && utf8.Valid(body) {
		return "text", string(body)
	}
	return "binary", base64.StdEncoding.EncodeToString(body)
}

// writeExportLine writes one message as a JSON line: the envelope's JSON
// form with the delivery's fields added, as acemq consume --json prints
// it. It writes the line in parts, so that it holds the body's text once.
func writeExportLine(w io.Writer, m acemq.Message[[]byte]) error {
	env, err := m.Envelope.MarshalJSON()
	if err != nil {
		return err
	}
	rest := struct {
		Queue       string `json:"queue"`
		RoutingKey  string `json:"routingKey"`
		Exchange    string `json:"exchange"`
		ContentType string `json:"contentType"`
		Redelivered bool   `json:"redelivered"`
		ReplyTo     string `json:"replyTo"`
	}{Queue: m.Queue, RoutingKey: m.RoutingKey, Exchange: m.Exchange, ContentType: m.ContentType, Redelivered: m.Redelivered, ReplyTo: m.ReplyTo}
	r, err := json.Marshal(rest)
	if err != nil {
		return fmt.Errorf("console: rendering a message as JSON: %w", err)
	}
	field := `,"body":`
	var body []byte
	if utf8.Valid(m.Body) {
		body, err = json.Marshal(string(m.Body))
	} else {
		field = `,"bodyBase64":`
		body, err = json.Marshal(base64.StdEncoding.EncodeToString(m.Body))
	}
	if err != nil {
		return fmt.Errorf("console: rendering a message as JSON: %w", err)
	}
	head := append(env[:len(env)-1:len(env)-1], ',')
	head = append(head, r[1:len(r)-1]...)
	head = append(head, field...)
	for _, part := range [][]byte{head, body, []byte("}\n")} {
		if _, err := w.Write(part); err != nil {
			return err
		}
	}
	return nil
}
