package schedule

import (
	"context"
	"errors"
	"maps"
	"slices"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/topology"
)

// TestHopRule: deliver below the shortest rung, else the longest rung
// whose time to live is at most what remains (docs/wire.md §5.7).
func TestHopRule(t *testing.T) {
	for _, c := range []struct {
		remaining time.Duration
		want      string // "" delivers
	}{
		{-time.Hour, ""}, {0, ""}, {999 * time.Millisecond, ""},
		{time.Second, "acemq.schedule.1s"}, {9999 * time.Millisecond, "acemq.schedule.1s"},
		{11 * time.Second, "acemq.schedule.10s"}, {59 * time.Second, "acemq.schedule.10s"},
		{61 * time.Second, "acemq.schedule.1m"}, {90 * time.Second, "acemq.schedule.1m"},
		{10 * time.Minute, "acemq.schedule.10m"}, {time.Hour, "acemq.schedule.1h"},
		{26 * time.Hour, "acemq.schedule.1h"},
	} {
		r, hop := family.next(c.remaining)
		if got := map[bool]string{true: r.name, false: ""}[hop]; got != c.want {
			t.Errorf("%v remaining: %q, want %q", c.remaining, got, c.want)
		}
	}
	if got := Rungs(); !slices.Equal(got, []string{"acemq.schedule.1h", "acemq.schedule.10m", "acemq.schedule.1m", "acemq.schedule.10s", "acemq.schedule.1s"}) {
		t.Errorf("Rungs() = %v", got)
	}
}

// contractQueues is §5.7's table, written out rather than derived.
var contractQueues = map[string]driver.Table{
	"acemq.schedule.1h":  {"x-message-ttl": int64(3600000), "x-dead-letter-exchange": "acemq.schedule", "x-dead-letter-routing-key": "acemq.schedule.due"},
	"acemq.schedule.10m": {"x-message-ttl": int64(600000), "x-dead-letter-exchange": "acemq.schedule", "x-dead-letter-routing-key": "acemq.schedule.due"},
	"acemq.schedule.1m":  {"x-message-ttl": int64(60000), "x-dead-letter-exchange": "acemq.schedule", "x-dead-letter-routing-key": "acemq.schedule.due"},
	"acemq.schedule.10s": {"x-message-ttl": int64(10000), "x-dead-letter-exchange": "acemq.schedule", "x-dead-letter-routing-key": "acemq.schedule.due"},
	"acemq.schedule.1s":  {"x-message-ttl": int64(1000), "x-dead-letter-exchange": "acemq.schedule", "x-dead-letter-routing-key": "acemq.schedule.due"},
	"acemq.schedule.due": {},
}

// TestTopologyPlan: exactly the contract's declarations: one durable
// direct exchange, six durable classic queues with exactly the table's
// arguments, each bound on its own name.
func TestTopologyPlan(t *testing.T) {
	plan, err := Topology().Plan()
	if err != nil {
		t.Fatal(err)
	}
	queues := map[string]driver.Table{}
	bound := map[string]bool{}
	for _, d := range plan {
		switch d.Kind {
		case topology.ExchangeDeclaration:
			if e := d.Exchange; e.Name != Exchange || e.Kind != driver.Direct || !e.Durable || e.AutoDelete || e.Internal || len(e.Args) != 0 {
				t.Errorf("exchange %+v", e)
			}
		case topology.QueueDeclaration:
			q := d.Queue
			if !q.Durable || q.Exclusive || q.AutoDelete {
				t.Errorf("queue %s: durable %v exclusive %v auto-delete %v", q.Name, q.Durable, q.Exclusive, q.AutoDelete)
			}
			queues[q.Name] = q.Args
		case topology.BindingDeclaration:
			b := d.Binding
			if b.Exchange != Exchange || b.RoutingKey != b.Queue {
				t.Errorf("binding %+v", b)
			}
			bound[b.Queue] = true
		}
	}
	if !maps.EqualFunc(queues, contractQueues, func(a, b driver.Table) bool { return maps.Equal(a, b) }) {
		t.Errorf("queues %v\nwant %v", queues, contractQueues)
	}
	for q := range contractQueues {
		if !bound[q] {
			t.Errorf("%s is not bound on its own name", q)
		}
	}
}

// TestContractTopology declares the scheduler's topology, then declares
// every queue again as another language's scheduler does, with the
// contract's arguments written out: the broker accepts a redeclaration
// only when every argument is equivalent, so success shows the topology
// is the contract's (and a changed argument is refused). Then a real
// one-second delay goes through the real 1s rung and the control queue.
func TestContractTopology(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c, reader := connect(t, url)
		if isMemory(url) {
			// On RabbitMQ the contract's queues are left in place: every
			// scheduler on the broker shares them (the CLI's tests among
			// them), and deleting them would drop what others scheduled.
			cleanupLadder(t, c, family)
		}
		if err := Declare(ctx, c); err != nil {
			t.Fatal(err)
		}
		dc := brokertest.Driver(c)
		if err := dc.DeclareExchange(ctx, driver.Exchange{Name: Exchange, Kind: driver.Direct, Durable: true}); err != nil {
			t.Errorf("redeclaring %s as the contract says: %v", Exchange, err)
		}
		for name, args := range contractQueues {
			if _, err := dc.DeclareQueue(ctx, driver.Queue{Name: name, Durable: true, Args: args}); err != nil {
				t.Errorf("redeclaring %s with the contract's arguments: %v", name, err)
			}
		}
		var pe *driver.PreconditionError
		_, err := dc.DeclareQueue(ctx, driver.Queue{Name: "acemq.schedule.1s", Durable: true, Args: driver.Table{
			"x-message-ttl": int64(1001), "x-dead-letter-exchange": Exchange, "x-dead-letter-routing-key": DueQueue}})
		if !errors.As(err, &pe) {
			t.Errorf("redeclaring the 1s rung with another time to live: %v, want PRECONDITION_FAILED", err)
		}
		// The failed declaration may have cost the driver its channel;
		// a fresh connection for the rest.
		c, reader = connect(t, url)
		drift, err := Topology().Drift(ctx, c, topology.WithSettingsProbe())
		if err != nil || len(drift) != 0 {
			t.Errorf("the declared scheduler drifts from Topology(): %v %v", drift, err)
		}

		tg := newTarget(t, c)
		serve(t, c)
		env, err := NewPublisher[order](c, "").SendAfter(ctx, tg.q, 1500*time.Millisecond, order{ID: "real"})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := tg.wait(t, 1)
		if got[0].Envelope.ID() != env.ID() || got[0].Payload.ID != "real" {
			t.Errorf("delivered %s %+v, want %s", got[0].Envelope.ID(), got[0].Payload, env.ID())
		}
		testenv.Eventually(t, "the hop counted", func() bool {
			return counters(t, reader)[key(telemetry.ScheduleHops, attribute.String("rung", "acemq.schedule.1s"))] == 1
		})
	})
}

// TestDelaysAcrossRungs: on the fast harness (every time to live divided
// by 20), delays of 1 s, 1.5 s, 11 s and 61 s and one already past are each
// delivered once, not before they are due (less the shortest rung), with
// the scheduling envelope's id, correlation and causation, the payload's
// bytes and content type, and none of the scheduler's or the broker's
// headers.
func TestDelaysAcrossRungs(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c, reader := connect(t, url)
		const scale = 20
		l := fastLadder(t, c, scale)
		tg := newTarget(t, c)
		serve(t, c, ladderOption{l})
		p := NewPublisher[order](c, "", ladderOption{l})
		cause := acemq.MustEnvelope(acemq.Fields{})
		delays := []time.Duration{time.Second, 11 * time.Second, 61 * time.Second, -5 * time.Second, 1500 * time.Millisecond}
		sent := map[string]acemq.Envelope{}
		due := map[string]time.Time{}
		for i, d := range delays {
			env := cause.Derive()
			if i == 1 {
				env, _ = env.Change(func(f *acemq.Fields) { f.Type = "order.remind"; f.Headers["tenant"] = "acme" })
			}
			at := time.Now().Add(d / scale)
			got, err := p.SendAt(ctx, tg.q, at, orderID(i), WithEnvelope(env))
			if err != nil {
				t.Fatal(err)
			}
			if got.ID() != env.ID() {
				t.Errorf("SendAt returned id %s, want the given envelope's %s", got.ID(), env.ID())
			}
			sent[orderID(i).ID], due[orderID(i).ID] = got, at
		}
		msgs, when := tg.wait(t, len(delays))
		shortest := l.rungs[len(l.rungs)-1].ttl
		for i, m := range msgs {
			want := sent[m.Payload.ID]
			e := m.Envelope
			if e.ID() != want.ID() || e.CorrelationID() != cause.CorrelationID() || e.CausationID() != cause.ID() {
				t.Errorf("%s delivered as id %s correlation %s causation %s, want %s %s %s", m.Payload.ID, e.ID(), e.CorrelationID(), e.CausationID(), want.ID(), cause.CorrelationID(), cause.ID())
			}
			if m.ContentType != "application/json" || string(m.Body) != `{"id":"`+m.Payload.ID+`"}` || e.Attempt() != 1 {
				t.Errorf("%s: content type %q body %s attempt %d", m.Payload.ID, m.ContentType, m.Body, e.Attempt())
			}
			for _, h := range []string{HeaderExchange, HeaderRoutingKey, HeaderDueAt, HeaderContentType, HeaderType, "x-death", "x-first-death-queue"} {
				if _, ok := e.Header(h); ok {
					t.Errorf("%s delivered with the header %s", m.Payload.ID, h)
				}
			}
			if early := due[m.Payload.ID].Sub(when[i]); early > shortest {
				t.Errorf("%s delivered %v before it was due, more than the shortest rung (%v)", m.Payload.ID, early, shortest)
			}
		}
		byID := map[string]acemq.Message[order]{}
		for _, m := range msgs {
			byID[m.Payload.ID] = m
		}
		if len(byID) != len(delays) {
			t.Errorf("delivered %d distinct messages, want %d", len(byID), len(delays))
		}
		if m := byID["o-1"]; m.Envelope.Type() != "order.remind" || m.Envelope.Headers()["tenant"] != "acme" {
			t.Errorf("the typed message arrived as type %q headers %v", m.Envelope.Type(), m.Envelope.Headers())
		}
		if m := byID["o-0"]; m.Envelope.Type() != tg.q {
			t.Errorf("an untyped message arrived as type %q, want the routing key %q", m.Envelope.Type(), tg.q)
		}
		dest := []attribute.KeyValue{attribute.String("exchange", ""), attribute.String("routing.key", tg.q)}
		// The target may take a delivery before its publisher has counted it.
		testenv.Eventually(t, "every delivery counted", func() bool {
			return counters(t, reader)[key(telemetry.ScheduleDelivered, dest...)] == int64(len(delays))
		})
		got := counters(t, reader)
		if n := got[key(telemetry.ScheduleHops, attribute.String("rung", l.rungs[2].name))]; n != 1 {
			t.Errorf("hops through %s = %d, want 1 (the 61 s delay)", l.rungs[2].name, n)
		}
		if n := got[key(telemetry.ScheduleHops, attribute.String("rung", l.rungs[3].name))]; n != 1 {
			t.Errorf("hops through %s = %d, want 1 (the 11 s delay)", l.rungs[3].name, n)
		}
		if n := got[key(telemetry.ScheduleHops, attribute.String("rung", l.rungs[4].name))]; n < 1 {
			t.Errorf("hops through %s = %d, want at least 1 (the 1.5 s delay)", l.rungs[4].name, n)
		}
		if n := int64(len(delays)); got[key(telemetry.ScheduleScheduled, dest...)] != n || got[key(telemetry.ScheduleDelivered, dest...)] != n {
			t.Errorf("scheduled %d, delivered %d, want %d of each (%v)", got[key(telemetry.ScheduleScheduled, dest...)], got[key(telemetry.ScheduleDelivered, dest...)], n, got)
		}
	})
}

// TestLongDelayHopsThroughTheLongestAgain: a delay several times the
// longest rung goes round it more than once.
func TestLongDelayHopsThroughTheLongestAgain(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c, reader := connect(t, url)
		prefix := testenv.Unique(t, "acemq-sched-long")
		l := newLadder(prefix, prefix+".due", 200*time.Millisecond, 200*time.Millisecond, 50*time.Millisecond)
		cleanupLadder(t, c, l)
		tg := newTarget(t, c)
		serve(t, c, ladderOption{l})
		env, err := NewPublisher[order](c, "", ladderOption{l}).SendAfter(ctx, tg.q, 700*time.Millisecond, order{ID: "long"})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := tg.wait(t, 1)
		if got[0].Envelope.ID() != env.ID() {
			t.Errorf("delivered id %s, want %s", got[0].Envelope.ID(), env.ID())
		}
		if n := counters(t, reader)[key(telemetry.ScheduleHops, attribute.String("rung", l.rungs[0].name))]; n < 2 {
			t.Errorf("%d hops through the longest rung, want at least 2 for a delay of 3.5 times it", n)
		}
	})
}

// TestStoppedControlConsumerLosesNothing: messages that fall due while no
// control consumer runs wait on the control queue and are delivered, once
// each, when one starts again.
func TestStoppedControlConsumerLosesNothing(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c, _ := connect(t, url)
		l := fastLadder(t, c, 20)
		tg := newTarget(t, c)
		stop := serve(t, c, ladderOption{l})
		p := NewPublisher[order](c, "", ladderOption{l})
		ids := map[string]bool{}
		for i := range 3 {
			env, err := p.SendAfter(ctx, tg.q, time.Duration(2+i)*time.Second/20, orderID(i)) // one hop on the 1s rung
			if err != nil {
				t.Fatal(err)
			}
			ids[env.ID()] = true
		}
		stop()
		testenv.Eventually(t, "the due messages waiting on the control queue", func() bool {
			return brokertest.Depth(t, c, l.due) == 3
		})
		if n := brokertest.Depth(t, c, tg.q); n != 0 {
			t.Fatalf("%d messages delivered with no control consumer running", n)
		}
		serve(t, c, ladderOption{l})
		got, _ := tg.wait(t, 3)
		for _, m := range got {
			if !ids[m.Envelope.ID()] {
				t.Errorf("delivered %s, not one of the scheduled %v", m.Envelope.ID(), ids)
			}
			delete(ids, m.Envelope.ID())
		}
		testenv.Eventually(t, "the control queue to drain", func() bool { return brokertest.Depth(t, c, l.due) == 0 })
	})
}

// TestUnroutableIsHeldAndMalformedDropped: a due message nothing routes
// waits on the hold rung and is delivered once its queue exists; a message
// on the control queue without the scheduler's headers is dropped and
// counted, and the consumer goes on.
func TestUnroutableIsHeldAndMalformedDropped(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c, reader := connect(t, url)
		l := fastLadder(t, c, 20)
		serve(t, c, ladderOption{l})
		if err := brokertest.Driver(c).Publish(ctx, driver.Message{RoutingKey: l.due, MessageID: "junk", Mandatory: true, Body: []byte("junk")}); err != nil {
			t.Fatal(err)
		}
		later := testenv.Unique(t, "acemq-sched-later")
		brokertest.DeleteAtEnd(t, c, later, contract.DeadLetterQueue(later), contract.ParkedQueue(later))
		env, err := NewPublisher[order](c, "", ladderOption{l}).SendAfter(ctx, later, 2*time.Second/20, order{ID: "held"})
		if err != nil {
			t.Fatal(err)
		}
		// And one for an exchange that does not exist.
		if _, err := NewPublisher[order](c, testenv.Unique(t, "acemq-sched-no-exchange"), ladderOption{l}).SendAfter(ctx, "k", 2*time.Second/20, order{ID: "nowhere"}); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the unroutable and malformed counts", func() bool {
			got := counters(t, reader)
			return got[key(telemetry.ScheduleUndeliverable, attribute.String("reason", "unroutable"))] >= 1 &&
				got[key(telemetry.ScheduleUndeliverable, attribute.String("reason", "no_exchange"))] >= 1 &&
				got[key(telemetry.ScheduleUndeliverable, attribute.String("reason", "malformed"))] == 1
		})
		if err := topology.New().Queue(later, topology.WithQueueType(topology.QueueClassic)).Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
		d := brokertest.Get(t, c, later)
		if d.MessageID != env.ID() || string(d.Body) != `{"id":"held"}` {
			t.Errorf("delivered %s %s, want %s", d.MessageID, d.Body, env.ID())
		}
	})
}

// TestInterop: a rung message as another language's scheduler writes it
// (a fresh envelope typed ScheduledMessage, the four headers, no content
// type header) is delivered by this control consumer as JSON, its body
// verbatim; and what this publisher puts on a rung carries exactly what
// another language's control consumer reads.
func TestInterop(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		ctx := context.Background()
		c, _ := connect(t, url)
		l := fastLadder(t, c, 20)
		if err := l.topology().Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
		tg := newTarget(t, c)

		// Ours, read raw off the 1m rung (a 3 s wait on this ladder)
		// before it expires.
		env, err := NewPublisher[order](c, "", ladderOption{l}).SendAfter(ctx, tg.q, 62*time.Second/20, order{ID: "ours"})
		if err != nil {
			t.Fatal(err)
		}
		d := brokertest.Get(t, c, l.rungs[2].name)
		h := d.Headers
		if d.ContentType != "application/octet-stream" || d.MessageID != env.ID() || string(d.Body) != `{"id":"ours"}` {
			t.Errorf("rung message: content type %q message-id %q body %s", d.ContentType, d.MessageID, d.Body)
		}
		if h[wire.HeaderType] != ScheduledType || h[wire.HeaderID] != env.ID() || h[HeaderExchange] != "" || h[HeaderRoutingKey] != tg.q || h[HeaderContentType] != "application/json" {
			t.Errorf("rung message headers %v", h)
		}
		if ms, ok := h[HeaderDueAt].(int64); !ok || ms < time.Now().UnixMilli() {
			t.Errorf("%s = %#v, want a future epoch-ms 64-bit integer", HeaderDueAt, h[HeaderDueAt])
		}
		if _, ok := h[HeaderType]; ok {
			t.Errorf("%s written for an untyped message", HeaderType)
		}

		// Theirs: straight onto the 1s rung, due now.
		serve(t, c, ladderOption{l})
		err = brokertest.Driver(c).Publish(ctx, driver.Message{
			Exchange: l.exchange, RoutingKey: l.rungs[4].name, Mandatory: true,
			ContentType: "application/octet-stream", MessageID: "sibling-hop-id",
			Headers: driver.Table{
				wire.HeaderID: "sibling-hop-id", wire.HeaderType: ScheduledType, wire.HeaderVersion: int32(1),
				wire.HeaderCorrelation: "sibling-hop-id", wire.HeaderAttempt: int32(1), wire.HeaderFirstSeen: time.Now().UnixMilli(),
				HeaderExchange: "", HeaderRoutingKey: tg.q, HeaderDueAt: time.Now().UnixMilli(),
			},
			Body: []byte(`{"id":"theirs"}`),
		})
		if err != nil {
			t.Fatal(err)
		}
		got, _ := tg.wait(t, 1)
		if m := got[0]; m.Payload.ID != "theirs" || m.ContentType != "application/json" || m.Envelope.ID() != "sibling-hop-id" || m.Envelope.Type() != tg.q {
			t.Errorf("delivered %+v as %s type %s content type %s", m.Payload, m.Envelope.ID(), m.Envelope.Type(), m.ContentType)
		}
	})
}

func isMemory(url string) bool { return strings.HasPrefix(url, "memory://") }
