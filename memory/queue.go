package memory

import (
	"bytes"
	"slices"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/wire"
)

// queue is a declared queue. All fields are guarded by broker.mu.
type queue struct {
	name       string
	durable    bool
	exclusive  bool
	autoDelete bool
	args       driver.Table
	owner      *conn // the declaring connection of an exclusive queue

	ttl    time.Duration // x-message-ttl
	hasTTL bool
	dlx    string // x-dead-letter-exchange
	hasDLX bool
	dlrk   string // x-dead-letter-routing-key
	hasDLK bool

	maxPriority uint8 // x-max-priority; 0: not a priority queue

	quorum        bool  // x-queue-type quorum
	deliveryLimit int64 // a quorum queue's delivery limit; -1: none (limit.go)

	msgs        []*message // ready messages, in delivery order (see before)
	consumers   []*sub
	rr          int // next consumer, round-robin
	hadConsumer bool
	deleted     bool

	timer   driver.Timer
	timerAt time.Time

	stream       *streamLog // the log of a stream queue; nil otherwise
	singleActive bool       // x-single-active-consumer
}

// message is a message held by the broker. Headers and body are owned by the
// broker and never mutated once enqueued; deliveries get copies.
type message struct {
	seq           uint64
	exchange      string
	routingKey    string
	contentType   string
	messageID     string
	correlationID string
	replyTo       string
	expiration    string
	persistent    bool
	headers       driver.Table
	body          []byte
	redelivered   bool
	priority      uint8

	failed   int64 // returns as failed, on a quorum queue (limit.go)
	acquired int64 // every return, on a quorum queue

	msgTTL    time.Duration // parsed expiration
	hasMsgTTL bool
	expiresAt time.Time // zero: never
	zeroTTL   bool      // deliverable only to a consumer ready at enqueue
	fresh     bool      // being enqueued right now
}

func (m *message) expired(t time.Time) bool {
	if m.expiresAt.IsZero() {
		return false
	}
	if m.zeroTTL && m.fresh {
		return false
	}
	return !t.Before(m.expiresAt)
}

// delivery hands the message up with its own copies of body and headers.
func (m *message) delivery() driver.Delivery {
	return driver.Delivery{
		Exchange:      m.exchange,
		RoutingKey:    m.routingKey,
		ContentType:   m.contentType,
		MessageID:     m.messageID,
		CorrelationID: m.correlationID,
		ReplyTo:       m.replyTo,
		Persistent:    m.persistent,
		Redelivered:   m.redelivered,
		Headers:       m.countHeaders(cloneTable(m.headers)),
		Body:          bytes.Clone(m.body),
		Priority:      m.priority,
	}
}

// forQueue returns a copy of m to enqueue on one queue; the copies share
// the immutable headers and body.
func (m *message) forQueue() *message {
	c := *m
	c.redelivered = false
	c.failed, c.acquired = 0, 0
	c.expiresAt = time.Time{}
	c.zeroTTL, c.fresh = false, false
	return &c
}

// unacked is a delivery awaiting settlement.
type unacked struct {
	tag uint64
	m   *message
	q   *queue
}

// enqueue appends a newly routed message to q and delivers what it can.
func (b *broker) enqueue(q *queue, m *message) {
	if q.deleted {
		return
	}
	if q.stream != nil {
		b.appendStream(q, m)
		return
	}
	b.seq++
	m.seq = b.seq
	ttl, has := q.ttl, q.hasTTL
	if m.hasMsgTTL && (!has || m.msgTTL < ttl) {
		ttl, has = m.msgTTL, true
	}
	if has {
		m.expiresAt = b.now().Add(ttl)
		m.zeroTTL = ttl == 0
	}
	q.msgs = slices.Insert(q.msgs, q.position(m), m)
	if m.zeroTTL {
		m.fresh = true
		b.dispatch(q)
		m.fresh = false
	}
	b.dispatch(q)
}

// requeue puts a delivered message back on q near its original position,
// marked redelivered.
func (b *broker) requeue(q *queue, m *message) {
	if q.deleted || q.stream != nil {
		return // a stream keeps its messages; nothing goes back
	}
	m.redelivered = true
	q.msgs = slices.Insert(q.msgs, q.position(m), m)
}

// dispatch expires messages at the head of q and hands ready messages to
// consumers with room, round-robin, then re-arms the expiry timer.
func (b *broker) dispatch(q *queue) {
	if q.deleted {
		return
	}
	if q.stream != nil {
		b.dispatchStream(q)
		return
	}
	t := b.now()
	for len(q.msgs) > 0 {
		m := q.msgs[0]
		if m.expired(t) {
			b.popHead(q)
			b.deadLetter(q, m, "expired")
			continue
		}
		s := q.nextConsumer()
		if s == nil {
			break
		}
		b.popHead(q)
		s.assign(q, m)
	}
	b.armTimer(q)
}

// expireHead dead-letters expired messages at the head of q.
func (b *broker) expireHead(q *queue) {
	t := b.now()
	for len(q.msgs) > 0 && q.msgs[0].expired(t) {
		m := b.popHead(q)
		b.deadLetter(q, m, "expired")
	}
}

func (b *broker) popHead(q *queue) *message {
	m := q.msgs[0]
	q.msgs[0] = nil
	q.msgs = q.msgs[1:]
	if len(q.msgs) == 0 {
		q.msgs = nil
	}
	return m
}

func (q *queue) nextConsumer() *sub {
	if q.singleActive {
		return q.activeConsumer()
	}
	n := len(q.consumers)
	for i := range n {
		idx := (q.rr + i) % n
		if s := q.consumers[idx]; s.hasRoom() {
			q.rr = (idx + 1) % n
			return s
		}
	}
	return nil
}

// armTimer schedules expiry of the message at the head of q, which is how
// RabbitMQ expires messages: from the head, whether or not anyone consumes.
func (b *broker) armTimer(q *queue) {
	if q.deleted || len(q.msgs) == 0 || q.msgs[0].expiresAt.IsZero() {
		q.stopTimer()
		return
	}
	at := q.msgs[0].expiresAt
	if q.timer != nil && q.timerAt.Equal(at) {
		return
	}
	q.stopTimer()
	var t driver.Timer
	t = b.clock.AfterFunc(at.Sub(b.now()), func() {
		b.mu.Lock()
		defer b.mu.Unlock()
		if q.timer != t {
			return // superseded or stopped
		}
		q.timer = nil
		b.dispatch(q)
	})
	q.timer, q.timerAt = t, at
}

func (q *queue) stopTimer() {
	if q.timer != nil {
		q.timer.Stop()
		q.timer = nil
	}
}

// removeConsumer detaches s from its queue and deletes an auto-delete queue
// that has lost its last consumer.
func (b *broker) removeConsumer(s *sub) {
	q := s.q
	i := slices.Index(q.consumers, s)
	if i < 0 {
		return
	}
	q.consumers = slices.Delete(q.consumers, i, i+1)
	if i < q.rr {
		q.rr--
	}
	if len(q.consumers) > 0 {
		q.rr %= len(q.consumers)
	} else {
		q.rr = 0
	}
	if q.autoDelete && q.hadConsumer && len(q.consumers) == 0 {
		b.deleteQueue(q)
	}
}

// deleteQueue removes q, its bindings and its ready messages, and cancels
// its consumers (as the broker does with basic.cancel). It returns how many
// ready messages were dropped.
func (b *broker) deleteQueue(q *queue) int {
	if q.deleted {
		return 0
	}
	n := len(q.msgs)
	q.deleted = true
	delete(b.queues, q.name)
	q.stopTimer()
	q.msgs = nil
	for _, ex := range b.exchanges {
		kept := ex.bindings[:0]
		for _, bd := range ex.bindings {
			if bd.q != q {
				kept = append(kept, bd)
			}
		}
		clear(ex.bindings[len(kept):])
		ex.bindings = kept
		b.maybeAutoDeleteExchange(ex)
	}
	consumers := q.consumers
	q.consumers = nil
	for _, s := range consumers {
		s.serverCancel()
	}
	return n
}

func (b *broker) maybeAutoDeleteExchange(ex *exchange) {
	if ex.autoDelete && ex.hadBinding && len(ex.bindings) == 0 {
		delete(b.exchanges, ex.name)
	}
}

// deadLetter republishes m, taken from q for reason ("rejected" or
// "expired"), to q's dead-letter exchange, or drops it when q has none.
func (b *broker) deadLetter(q *queue, m *message, reason string) {
	if !q.hasDLX {
		return
	}
	ex, ok := b.exchanges[q.dlx]
	if q.dlx != "" && !ok {
		return // RabbitMQ drops it (and logs); so do we
	}
	key := m.routingKey
	if q.hasDLK {
		key = q.dlrk
	}
	t := b.now()
	h := cloneTable(m.headers)
	if h == nil {
		h = driver.Table{}
	}
	deaths := deathEntries(h["x-death"])
	found := false
	for i, d := range deaths {
		if d["queue"] == q.name && d["reason"] == reason {
			n, _ := wire.Integer(d["count"])
			d["count"] = n + 1
			deaths = slices.Delete(deaths, i, i+1)
			deaths = slices.Insert(deaths, 0, d)
			found = true
			break
		}
	}
	if !found {
		d := driver.Table{
			"count":        int64(1),
			"reason":       reason,
			"queue":        q.name,
			"time":         time.Unix(t.Unix(), 0),
			"exchange":     m.exchange,
			"routing-keys": []any{m.routingKey},
		}
		if m.expiration != "" {
			d["original-expiration"] = m.expiration
		}
		deaths = slices.Insert(deaths, 0, d)
	}
	arr := make([]any, len(deaths))
	for i, d := range deaths {
		arr[i] = d
	}
	h["x-death"] = arr
	if _, ok := h["x-first-death-reason"]; !ok {
		h["x-first-death-reason"] = reason
		h["x-first-death-queue"] = q.name
		h["x-first-death-exchange"] = m.exchange
	}
	h["x-last-death-reason"] = reason
	h["x-last-death-queue"] = q.name
	h["x-last-death-exchange"] = m.exchange

	nm := &message{
		exchange:      q.dlx,
		routingKey:    key,
		contentType:   m.contentType,
		messageID:     m.messageID,
		correlationID: m.correlationID,
		replyTo:       m.replyTo,
		persistent:    m.persistent,
		priority:      m.priority,
		headers:       h,
		body:          m.body,
	}
	var targets []*queue
	if q.dlx == "" {
		if tq, ok := b.queues[key]; ok {
			targets = []*queue{tq}
		}
	} else {
		targets = b.route(ex, key, h)
	}
	for _, tq := range targets {
		if isCycle(tq.name, deaths) {
			continue
		}
		b.enqueue(tq, nm.forQueue())
	}
}

// deathEntries reads an x-death header as a list of fresh tables.
func deathEntries(v any) []driver.Table {
	arr, ok := v.([]any)
	if !ok {
		return nil
	}
	out := make([]driver.Table, 0, len(arr))
	for _, e := range arr {
		if t, ok := e.(driver.Table); ok {
			out = append(out, cloneTable(t))
		}
	}
	return out
}

// isCycle reports a dead-letter cycle that RabbitMQ would break: the target
// queue already appears in x-death and no death since was a rejection.
func isCycle(target string, deaths []driver.Table) bool {
	for i, d := range deaths {
		if d["queue"] == target {
			for _, e := range deaths[:i+1] {
				if e["reason"] == "rejected" {
					return false
				}
			}
			return true
		}
	}
	return false
}
