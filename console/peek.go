package console

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"mime"
	"sort"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/claimcheck"
)

// A BodyDecoder turns a message's body as it travelled into what the
// console shows: for example, decrypts it. It returns the body and its
// content type; ok false leaves the body as it is (not for this decoder). A
// decoder is given the message as read; it must not keep it.
type BodyDecoder func(m acemq.Message[[]byte]) (body []byte, contentType string, ok bool, err error)

// peeked is what one look at a queue read.
type peeked struct {
	queue     string
	messages  []acemq.Message[[]byte]
	truncated bool // the queue held more than the peek limit
}

// peek reads up to the peek limit of queue's messages and puts every one
// back (Browser.Close), so nothing is taken. The caller holds c.mu.
func (c *Console) peek(ctx context.Context, queue string) (peeked, error) {
	p := peeked{queue: queue}
	b, err := c.conn.Browse(ctx, queue)
	if err != nil {
		return p, err
	}
	defer b.Close()
	err = each(ctx, b, func(m acemq.Message[[]byte]) (bool, error) {
		if len(p.messages) == c.cfg.peekLimit {
			p.truncated = true
			return false, nil
		}
		p.messages = append(p.messages, m)
		return true, nil
	})
	return p, err
}

// each reads b's messages one at a time and gives each to f, until f says
// no more, fails, or the queue has no more ready messages. What f does not
// take stays held by b until it closes.
func each(ctx context.Context, b *acemq.Browser, f func(m acemq.Message[[]byte]) (more bool, err error)) error {
	for {
		m, ok, err := b.Next(ctx)
		if err != nil || !ok {
			return err
		}
		if more, err := f(m); err != nil || !more {
			return err
		}
	}
}

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
	Queue      string        `json:"queue"`
	Role       string        `json:"role"`
	Target     string        `json:"target,omitempty"` // where replay sends them
	Actions    bool          `json:"actions"`          // replay and delete offered
	Peeked     int           `json:"peeked"`
	Truncated  bool          `json:"truncated"`
	PeekLimit  int           `json:"peekLimit"`
	Groups     []reasonGroup `json:"groups"`
	ReadAt     time.Time     `json:"readAt"`
	QueueDepth int           `json:"depth"`
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

func summarise(m acemq.Message[[]byte]) messageSummary {
	env := m.Envelope
	s := messageSummary{ID: env.ID(), Type: env.Type(), Attempt: env.Attempt(), Reason: env.Reason(), RoutingKey: m.RoutingKey, ContentType: m.ContentType, Size: len(m.Body), Redelivered: m.Redelivered, Seen: when(env)}
	if t, ok := deathTime(env); ok {
		s.DeadAt = &t
	}
	if _, ok := env.Age(); ok {
		t := env.FirstSeen()
		s.FirstSeen = &t
	}
	return s
}

// groupMessages groups messages by GroupKey, largest group first.
func groupMessages(ms []acemq.Message[[]byte]) []reasonGroup {
	byKey := map[string]*reasonGroup{}
	var order []string
	types := map[string]map[string]bool{}
	for _, m := range ms {
		key := GroupKey(m.Envelope.Reason())
		g, ok := byKey[key]
		if !ok {
			g = &reasonGroup{ID: groupID(key), Key: key, Example: m.Envelope.Reason()}
			byKey[key] = g
			order = append(order, key)
			types[key] = map[string]bool{}
		}
		s := summarise(m)
		g.Count++
		g.Messages = append(g.Messages, s)
		if t := s.Seen; t != nil {
			if g.First == nil || t.Before(*g.First) {
				g.First = t
			}
			if g.Last == nil || t.After(*g.Last) {
				g.Last = t
			}
		}
		if !types[key][s.Type] {
			types[key][s.Type] = true
			g.Types = append(g.Types, s.Type)
		}
	}
	out := make([]reasonGroup, 0, len(order))
	for _, k := range order {
		out = append(out, *byKey[k])
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Count > out[j].Count })
	return out
}

// view is GET /api/queues/NAME: the queue's messages, peeked, grouped.
func (c *Console) view(ctx context.Context, queue string) (queueView, error) {
	c.mu.Lock()
	p, err := c.peek(ctx, queue)
	var depth int
	if err == nil {
		if info, ierr := c.conn.Inspect(ctx, queue); ierr == nil {
			depth = info.Messages
		}
	}
	c.mu.Unlock()
	if err != nil {
		return queueView{}, err
	}
	// The broker may count the put-back messages a moment later than it
	// answers.
	depth = max(depth, len(p.messages))
	_, role := roleOf(queue)
	v := queueView{Queue: queue, Role: role, Peeked: len(p.messages), Truncated: p.truncated, PeekLimit: c.cfg.peekLimit, Groups: groupMessages(p.messages), ReadAt: time.Now().UTC()}
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

// detail peeks queue for the message with id.
func (c *Console) detail(ctx context.Context, queue, id string) (messageDetail, bool, error) {
	c.mu.Lock()
	p, err := c.peek(ctx, queue)
	c.mu.Unlock()
	if err != nil {
		return messageDetail{}, false, err
	}
	var found *acemq.Message[[]byte]
	dups := 0
	for i := range p.messages {
		if p.messages[i].Envelope.ID() == id {
			if found == nil {
				found = &p.messages[i]
			} else {
				dups++
			}
		}
	}
	if found == nil {
		return messageDetail{}, false, nil
	}
	d, err := c.describe(*found)
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

// exportLine is one message as a JSON line: the envelope's JSON form with
// the delivery's fields added, as acemq consume --json prints it.
func (c *Console) exportLine(m acemq.Message[[]byte]) ([]byte, error) {
	env, err := m.Envelope.MarshalJSON()
	if err != nil {
		return nil, err
	}
	rest := struct {
		Queue       string  `json:"queue"`
		RoutingKey  string  `json:"routingKey"`
		Exchange    string  `json:"exchange"`
		ContentType string  `json:"contentType"`
		Redelivered bool    `json:"redelivered"`
		ReplyTo     string  `json:"replyTo"`
		Body        *string `json:"body,omitempty"`
		BodyBase64  *string `json:"bodyBase64,omitempty"`
	}{Queue: m.Queue, RoutingKey: m.RoutingKey, Exchange: m.Exchange, ContentType: m.ContentType, Redelivered: m.Redelivered, ReplyTo: m.ReplyTo}
	if utf8.Valid(m.Body) {
		s := string(m.Body)
		rest.Body = &s
	} else {
		s := base64.StdEncoding.EncodeToString(m.Body)
		rest.BodyBase64 = &s
	}
	r, err := json.Marshal(rest)
	if err != nil {
		return nil, fmt.Errorf("console: rendering a message as JSON: %w", err)
	}
	line := append(env[:len(env)-1:len(env)-1], ',')
	line = append(line, r[1:]...)
	return append(line, '\n'), nil
}
