package acemq_test

import (
	"context"
	"encoding/json"
	"errors"
	"math"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"go.uber.org/goleak"
)

// memConn connects to a memory broker of the test's own (so tests share no
// queues), checks for leaked goroutines when the test ends, and declares
// the given queues.
func memConn(t *testing.T, queues ...string) *acemq.Conn {
	t.Helper()
	t.Cleanup(func() { goleak.VerifyNone(t, goleak.IgnoreCurrent()) })
	ctx := context.Background()
	c, err := acemq.Connect(ctx, brokertest.MemoryURL(t), acemq.WithOrigin("orders@test"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Close(context.Background()); err != nil {
			t.Errorf("closing the connection: %v", err)
		}
	})
	for _, q := range queues {
		if _, err := brokertest.Driver(c).DeclareQueue(ctx, driver.Queue{Name: q, Durable: true}); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// getOne fetches the next message of q, failing the test when there is none.
func getOne(t *testing.T, c *acemq.Conn, q string) driver.Delivery {
	t.Helper()
	d, ok, err := brokertest.Driver(c).Get(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	if !ok {
		t.Fatalf("queue %s is empty", q)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	return d
}

func queueDepth(t *testing.T, c *acemq.Conn, q string) int {
	t.Helper()
	info, err := brokertest.Driver(c).InspectQueue(context.Background(), q)
	if err != nil {
		t.Fatal(err)
	}
	return info.Messages
}

func TestPublisherSend(t *testing.T) {
	c := memConn(t, "orders.new")
	ctx := context.Background()
	p := acemq.NewPublisher[codecOrder](c, "")
	if p.Exchange() != "" {
		t.Errorf("Exchange() = %q", p.Exchange())
	}
	env, err := p.Send(ctx, "orders.new", codecOrder{ID: "o-1", Amount: 5})
	if err != nil {
		t.Fatal(err)
	}
	if !uuidShape.MatchString(env.ID()) || env.CorrelationID() != env.ID() || env.Attempt() != 1 {
		t.Errorf("the returned envelope has no defaults: %#v", env.Fields())
	}
	if env.Origin() != "orders@test" {
		t.Errorf("Origin = %q, want the connection's orders@test", env.Origin())
	}
	d := getOne(t, c, "orders.new")
	if d.MessageID != env.ID() {
		t.Errorf("message-id %q, want the envelope id %q", d.MessageID, env.ID())
	}
	if d.Headers["x-acemq-id"] != env.ID() || d.Headers["x-acemq-origin"] != "orders@test" || d.Headers["x-acemq-type"] != "orders.new" {
		t.Errorf("headers on the wire: %v", d.Headers)
	}
	if !d.Persistent {
		t.Error("a default publish is not persistent")
	}
	if d.ContentType != "application/json" || string(d.Body) != `{"id":"o-1","amount":5}` {
		t.Errorf("content type %q, body %s", d.ContentType, d.Body)
	}
	// What arrived reads back as the envelope Send returned.
	if diff := envelopeDiff(acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID), change(t, env, func(f *acemq.Fields) { f.Type = "orders.new" })); diff != "" {
		t.Errorf("the delivered envelope differs from the returned one: %s", diff)
	}
}

// TestPublisherSendKeepsOrigin: an envelope with an origin keeps it; every
// field given is sent as given.
func TestPublisherSendKeepsOrigin(t *testing.T) {
	c := memConn(t, "q")
	ctx := context.Background()
	in := mustEnvelope(t, acemq.Fields{
		ID: "fixed-id", Type: "order.placed", Version: 2, Origin: "billing@host-2",
		CausationID: "cause", Headers: map[string]any{"x-tenant": "acme"},
	})
	env, err := acemq.NewPublisher[string](c, "").Send(ctx, "q", "hi", acemq.WithEnvelope(in))
	if err != nil {
		t.Fatal(err)
	}
	if env.Origin() != "billing@host-2" || env.ID() != "fixed-id" {
		t.Errorf("Send changed the envelope: %#v", env.Fields())
	}
	d := getOne(t, c, "q")
	for k, want := range map[string]any{
		"x-acemq-origin": "billing@host-2", "x-acemq-id": "fixed-id", "x-acemq-type": "order.placed",
		"x-acemq-version": int32(2), "x-acemq-causation": "cause", "x-tenant": "acme",
	} {
		if d.Headers[k] != want {
			t.Errorf("%s = %#v, want %#v", k, d.Headers[k], want)
		}
	}
	if d.MessageID != "fixed-id" || string(d.Body) != `"hi"` {
		t.Errorf("message-id %q body %s", d.MessageID, d.Body)
	}
}

func TestPublisherTransient(t *testing.T) {
	c := memConn(t, "q")
	if _, err := acemq.NewPublisher[string](c, "", acemq.WithPersistent(false)).Send(context.Background(), "q", "x"); err != nil {
		t.Fatal(err)
	}
	if d := getOne(t, c, "q"); d.Persistent {
		t.Error("a Transient publisher sent a persistent message")
	}
}

func TestPublisherMandatoryByDefault(t *testing.T) {
	c := memConn(t)
	env, err := acemq.NewPublisher[string](c, "").Send(context.Background(), "nowhere", "x")
	var ue *driver.ReturnError
	if !errors.As(err, &ue) {
		t.Fatalf("Send to an unbound key: %v, want a *driver.ReturnError", err)
	}
	if ue.Code != 312 || ue.Text != "NO_ROUTE" || ue.RoutingKey != "nowhere" {
		t.Errorf("driver.ReturnError = %+v", ue)
	}
	if !strings.Contains(err.Error(), `"nowhere"`) {
		t.Errorf("the error does not name the routing key: %v", err)
	}
	if env.ID() == "" {
		t.Error("a failed Send returned no envelope; the caller cannot log which message failed")
	}
}

func TestPublisherAllowUnroutable(t *testing.T) {
	c := memConn(t)
	if _, err := acemq.NewPublisher[string](c, "", acemq.WithMandatory(false)).Send(context.Background(), "nowhere", "x"); err != nil {
		t.Errorf("an AllowUnroutable publish failed: %v", err)
	}
}

func TestPublisherEncodeFailure(t *testing.T) {
	c := memConn(t, "q")
	if _, err := acemq.NewPublisher[any](c, "").Send(context.Background(), "q", make(chan int)); err == nil {
		t.Error("Send of an unencodable value succeeded")
	}
	if n := queueDepth(t, c, "q"); n != 0 {
		t.Errorf("an unencodable value put %d messages on the queue", n)
	}
}

func TestPublisherSendAll(t *testing.T) {
	c := memConn(t, "a", "b")
	ctx := context.Background()
	p := acemq.NewPublisher[int](c, "")
	given := mustEnvelope(t, acemq.Fields{ID: "given"})
	msgs := []acemq.Outgoing[int]{
		{RoutingKey: "a", Payload: 0},
		{RoutingKey: "nowhere", Payload: 1},
		{RoutingKey: "b", Payload: 2, Envelope: given},
		{RoutingKey: "a", Payload: 3},
		{RoutingKey: "nowhere-else", Payload: 4},
	}
	results, err := p.SendAll(ctx, msgs)
	if len(results) != len(msgs) {
		t.Fatalf("%d results for %d messages", len(results), len(msgs))
	}
	var be *acemq.BatchError
	if !errors.As(err, &be) {
		t.Fatalf("SendAll error %v, want a *BatchError", err)
	}
	if be.Total != 5 || be.Confirmed != 3 || be.Failed != 2 || len(be.Results) != 5 {
		t.Errorf("BatchError counts %+v", be)
	}
	const prefix = "2 of 5 messages were not confirmed; 3 were. The first failure was: "
	if !strings.HasPrefix(err.Error(), prefix) || !strings.Contains(err.Error(), "312 NO_ROUTE") || !strings.Contains(err.Error(), `"nowhere"`) {
		t.Errorf("error %q, want %q followed by the first (nowhere) failure", err, prefix)
	}
	var ue *driver.ReturnError
	if !errors.As(err, &ue) || ue.RoutingKey != "nowhere" {
		t.Errorf("the BatchError does not unwrap to the first failure: %v", err)
	}
	for i, r := range results {
		failed := msgs[i].RoutingKey != "a" && msgs[i].RoutingKey != "b"
		if (r.Err != nil) != failed {
			t.Errorf("result %d (%s): err %v", i, msgs[i].RoutingKey, r.Err)
		}
		if !errors.As(r.Err, &ue) && failed {
			t.Errorf("result %d: %v is not a *driver.ReturnError", i, r.Err)
		}
		if r.Envelope.Origin() != "orders@test" || r.Envelope.ID() == "" {
			t.Errorf("result %d envelope %#v", i, r.Envelope.Fields())
		}
	}
	if results[2].Envelope.ID() != "given" {
		t.Errorf("result 2 id %q, want the given envelope's", results[2].Envelope.ID())
	}
	// Results are in payload order: the queue holds the confirmed ones with
	// the ids the results name.
	for _, i := range []int{0, 3} {
		d := getOne(t, c, "a")
		var n int
		if err := json.Unmarshal(d.Body, &n); err != nil || n != i || d.MessageID != results[i].Envelope.ID() {
			t.Errorf("queue a: payload %s id %s, want %d and %s", d.Body, d.MessageID, i, results[i].Envelope.ID())
		}
	}
	if d := getOne(t, c, "b"); d.MessageID != "given" || string(d.Body) != "2" {
		t.Errorf("queue b: %s %s", d.MessageID, d.Body)
	}

	// All confirmed: no error.
	results, err = p.SendAll(ctx, []acemq.Outgoing[int]{{RoutingKey: "a", Payload: 1}, {RoutingKey: "b", Payload: 2}})
	if err != nil || len(results) != 2 || results[0].Err != nil || results[1].Err != nil {
		t.Errorf("SendAll of routable messages: %v %+v", err, results)
	}
	// An empty batch is nothing to do.
	if results, err := p.SendAll(ctx, nil); err != nil || len(results) != 0 {
		t.Errorf("SendAll(nil) = %v, %v", results, err)
	}
}

// TestPublisherSendAllEncodeFailure: a payload that cannot be encoded fails
// alone; the rest of the batch is published.
func TestPublisherSendAllEncodeFailure(t *testing.T) {
	c := memConn(t, "q")
	p := acemq.NewPublisher[any](c, "")
	results, err := p.SendAll(context.Background(), []acemq.Outgoing[any]{
		{RoutingKey: "q", Payload: "ok"}, {RoutingKey: "q", Payload: make(chan int)}, {RoutingKey: "q", Payload: "ok too"},
	})
	var be *acemq.BatchError
	if !errors.As(err, &be) || be.Failed != 1 || be.Confirmed != 2 {
		t.Fatalf("err = %v", err)
	}
	if results[1].Err == nil || results[0].Err != nil || results[2].Err != nil {
		t.Errorf("results %+v", results)
	}
	if n := queueDepth(t, c, "q"); n != 2 {
		t.Errorf("queue holds %d messages, want 2", n)
	}
}

// TestPublisherReservedHeaders: there is no way to put a reserved header
// into an application publish. Building one is refused, and the unknown
// x-acemq-* headers a delivered envelope carries stay with that delivery.
func TestPublisherReservedHeaders(t *testing.T) {
	c := memConn(t, "q")
	ctx := context.Background()
	base := mustEnvelope(t, acemq.Fields{})
	if _, err := base.Change(func(f *acemq.Fields) { f.Headers["x-acemq-attempt"] = int32(9) }); err == nil {
		t.Error("Change accepted x-acemq-attempt")
	}
	if _, err := base.Change(func(f *acemq.Fields) { f.Headers = map[string]any{"x-tenant": "acme", "X-AceMQ-Id": "mine"} }); err == nil {
		t.Error("Change accepted X-AceMQ-Id")
	}
	if _, err := acemq.NewEnvelope(acemq.Fields{Headers: map[string]any{"x-acemq-origin": "me"}}); err == nil {
		t.Error("NewEnvelope accepted x-acemq-origin")
	}

	delivered := acemq.ReadEnvelope(map[string]any{
		"x-acemq-id": "in-1", "x-acemq-attempt": int32(2), "x-acemq-from-the-future": "v9", "x-tenant": "acme",
	}, "in", "in-1")
	if got := delivered.AppendHeaders(nil, "in")["x-acemq-from-the-future"]; got != "v9" {
		t.Fatalf("a republish of the delivery does not carry the unknown header: %v", got)
	}
	if _, err := acemq.NewPublisher[string](c, "").Send(ctx, "q", "x", acemq.WithEnvelope(change(t, delivered, func(f *acemq.Fields) { f.Type = "next" }))); err != nil {
		t.Fatal(err)
	}
	d := getOne(t, c, "q")
	if _, ok := d.Headers["x-acemq-from-the-future"]; ok {
		t.Error("an application publish carried a delivered message's unknown x-acemq-* header")
	}
	if d.Headers["x-tenant"] != "acme" || d.Headers["x-acemq-type"] != "next" {
		t.Errorf("headers %v", d.Headers)
	}
	for k := range d.Headers {
		if acemq.IsReserved(k) && !strings.HasPrefix(k, "x-acemq-") {
			t.Errorf("odd reserved header %s", k)
		}
	}
}

// TestPublisherConsumeRoundTrip: a typed value sent with a Publisher is
// decoded by Consume into the same value, with the envelope it was sent
// with, and accepted.
func TestPublisherConsumeRoundTrip(t *testing.T) {
	c := memConn(t, "orders.new")
	ctx := context.Background()
	type got struct {
		m acemq.Message[codecOrder]
	}
	received := make(chan got, 1)
	settled := make(chan acemq.Settlement, 1)
	remove := c.OnSettle(func(s acemq.Settlement) { settled <- s })
	defer remove()
	cons, err := acemq.Consume(ctx, c, "orders.new", func(_ context.Context, m acemq.Message[codecOrder]) acemq.Ack {
		received <- got{m}
		return acemq.Accept()
	})
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := cons.Close(context.Background()); err != nil {
			t.Errorf("closing the consumer: %v", err)
		}
	}()

	in := mustEnvelope(t, acemq.Fields{Type: "order.placed", Headers: map[string]any{"x-tenant": "acme"}})
	sent, err := acemq.NewPublisher[codecOrder](c, "").Send(ctx, "orders.new", codecOrder{ID: "o-9", Amount: 12, Tags: []string{"a"}}, acemq.WithEnvelope(in))
	if err != nil {
		t.Fatal(err)
	}
	var r got
	select {
	case r = <-received:
	case <-time.After(10 * time.Second):
		t.Fatal("no delivery within 10 s")
	}
	m := r.m
	if m.Payload.ID != "o-9" || m.Payload.Amount != 12 || len(m.Payload.Tags) != 1 {
		t.Errorf("payload %+v", m.Payload)
	}
	if diff := envelopeDiff(m.Envelope, sent); diff != "" {
		t.Errorf("the consumer's envelope differs from the sent one: %s", diff)
	}
	if v, _ := m.Envelope.Header("x-tenant"); v != "acme" {
		t.Errorf("x-tenant = %v", v)
	}
	if m.Queue != "orders.new" || m.RoutingKey != "orders.new" || m.ContentType != "application/json" || m.Redelivered {
		t.Errorf("message details %+v", m)
	}
	select {
	case s := <-settled:
		if s.Envelope.ID() != sent.ID() || s.Err != nil {
			t.Errorf("settlement %+v", s)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("no settlement within 10 s")
	}
	if n := queueDepth(t, c, "orders.new"); n != 0 {
		t.Errorf("%d messages left after an accept", n)
	}
}

// SendAll on both brokers: a payload the codec cannot encode fails alone
// and is not published, an unroutable message fails alone, and the others
// are confirmed and arrive in order, with the envelopes SendAll reports.
func TestSendAllMixedBatch(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "sendall")
		ctx := context.Background()
		p := acemq.NewPublisher[float64](c, "")
		msgs := []acemq.Outgoing[float64]{
			{RoutingKey: q, Payload: 1},
			{RoutingKey: q, Payload: math.NaN()}, // encoding/json refuses NaN
			{RoutingKey: "acemq-test-nowhere-" + q, Payload: 2},
			{RoutingKey: q, Payload: 3},
		}
		results, err := p.SendAll(ctx, msgs)
		var be *acemq.BatchError
		if !errors.As(err, &be) || be.Failed != 2 || be.Confirmed != 2 {
			t.Fatalf("SendAll = %v, want a *BatchError with 2 failed and 2 confirmed", err)
		}
		var ue *json.UnsupportedValueError
		if !errors.As(results[1].Err, &ue) {
			t.Errorf("the NaN payload failed with %v, want a *json.UnsupportedValueError", results[1].Err)
		}
		var re *driver.ReturnError
		if !errors.As(results[2].Err, &re) {
			t.Errorf("the unroutable message failed with %v, want a *driver.ReturnError", results[2].Err)
		}
		for _, i := range []int{0, 3} {
			if results[i].Err != nil || results[i].Envelope.ID() == "" {
				t.Errorf("message %d: %+v, want confirmed with an envelope", i, results[i])
			}
		}
		for _, i := range []int{0, 3} {
			d := brokertest.Get(t, c, q)
			if d.MessageID != results[i].Envelope.ID() {
				t.Errorf("got message %s, want %s (message %d)", d.MessageID, results[i].Envelope.ID(), i)
			}
		}
		if n := brokertest.Depth(t, c, q); n != 0 {
			t.Errorf("%d more messages on the queue", n)
		}
	})
}

// One WithEnvelope option sent through two connections: each send stamps
// its own connection's origin on its copy of the envelope, never on the
// option's, which sends the same envelope every time.
func TestPublisherSendReusedEnvelopeOption(t *testing.T) {
	ctx := context.Background()
	opt := acemq.WithEnvelope(mustEnvelope(t, acemq.Fields{ID: "reused", Type: "t"}))
	first := memConn(t, "q")
	second, err := acemq.Connect(ctx, brokertest.MemoryURL(t), acemq.WithOrigin("second@test"))
	if err != nil {
		t.Fatal(err)
	}
	defer second.Close(ctx)
	if _, err := brokertest.Driver(second).DeclareQueue(ctx, driver.Queue{Name: "q", Durable: true}); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		c      *acemq.Conn
		origin string
	}{{first, "orders@test"}, {second, "second@test"}, {first, "orders@test"}} {
		env, err := acemq.NewPublisher[string](tc.c, "").Send(ctx, "q", "hi", opt)
		if err != nil {
			t.Fatal(err)
		}
		if env.ID() != "reused" || env.Origin() != tc.origin {
			t.Errorf("sent id %q origin %q, want reused and %q", env.ID(), env.Origin(), tc.origin)
		}
		if d := getOne(t, tc.c, "q"); d.Headers["x-acemq-origin"] != tc.origin {
			t.Errorf("x-acemq-origin = %v, want %q", d.Headers["x-acemq-origin"], tc.origin)
		}
	}
}
