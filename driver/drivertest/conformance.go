package drivertest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
)

// RunConformance runs the conformance suite as subtests of t. open must
// return a fresh connection to the same broker on every call; the suite
// closes the connections it opens (closing one twice must be harmless).
//
// The suite covers declaration rules, routing through every exchange kind
// and the default exchange, NO_ROUTE returns, publisher confirms under
// concurrency, requeue and the redelivered flag, TTL and dead-lettering
// with x-death, per-message expiration, prefetch, Get, exclusive queues,
// Cancel and Close semantics and round-robin between subscriptions. Tests
// that need a capability the driver does not report are skipped.
func RunConformance(t *testing.T, open func(t *testing.T) driver.Conn) {
	t.Helper()
	tests := []struct {
		name string
		fn   func(*env)
	}{
		{"DeclareExchange", testDeclareExchange},
		{"DeclareQueue", testDeclareQueue},
		{"QuorumRules", testQuorumRules},
		{"DeleteAndInspect", testDeleteAndInspect},
		{"DirectAndDefaultExchange", testDirectAndDefault},
		{"TopicExchange", testTopic},
		{"FanoutExchange", testFanout},
		{"Unbind", testUnbind},
		{"NoRoute", testNoRoute},
		{"Properties", testProperties},
		{"Confirms", testConfirms},
		{"ConcurrentConfirms", testConcurrentConfirms},
		{"PublishBatch", testPublishBatch},
		{"NackRequeueRedelivers", testNackRequeue},
		{"DeadLetterOnReject", testDeadLetterReject},
		{"TTLDeadLetter", testTTLDeadLetter},
		{"RetryRung", testRetryRung},
		{"PerMessageExpiration", testPerMessageExpiration},
		{"Prefetch", testPrefetch},
		{"Get", testGet},
		{"ExclusiveQueue", testExclusiveQueue},
		{"AutoDeleteQueue", testAutoDeleteQueue},
		{"Cancel", testCancel},
		{"CloseRequeues", testCloseRequeues},
		{"ConnCloseEndsSubscriptions", testConnClose},
		{"RoundRobin", testRoundRobin},
		{"Receive", testReceive},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			tc.fn(newEnv(t, open))
		})
	}
}

func testDeclareExchange(e *env) {
	t := e.t
	name := e.exchange("x", driver.Direct)
	if err := e.admin.DeclareExchange(e.ctx, driver.Exchange{Name: name, Kind: driver.Direct, Durable: true}); err != nil {
		t.Fatalf("redeclaring exchange %q with the same settings: %v", name, err)
	}
	var pe *driver.PreconditionError
	err := e.admin.DeclareExchange(e.ctx, driver.Exchange{Name: name, Kind: driver.Direct, Durable: false})
	if !errors.As(err, &pe) {
		t.Fatalf("redeclaring exchange %q non-durable = %v, want *driver.PreconditionError", name, err)
	}
	if !strings.Contains(pe.Detail, "durable") {
		t.Errorf("PreconditionError detail %q does not name 'durable'", pe.Detail)
	}
	err = e.admin.DeclareExchange(e.ctx, driver.Exchange{Name: name, Kind: driver.Topic, Durable: true})
	if !errors.As(err, &pe) {
		t.Fatalf("redeclaring exchange %q as topic = %v, want *driver.PreconditionError", name, err)
	}
	// The connection is still usable after a refused declaration.
	if err := e.admin.Ping(e.ctx); err != nil {
		t.Fatalf("ping after a refused declaration: %v", err)
	}
	if err := e.admin.InspectExchange(e.ctx, name); err != nil {
		t.Fatalf("inspect exchange %q: %v", name, err)
	}
	if err := e.admin.InspectExchange(e.ctx, e.name("missing")); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("inspect of a missing exchange = %v, want an error wrapping driver.ErrNotFound", err)
	}
	var ae *driver.AccessError
	if err := e.admin.DeclareExchange(e.ctx, driver.Exchange{Name: "amq." + e.name("reserved"), Kind: driver.Direct}); !errors.As(err, &ae) || ae.Code != 403 {
		t.Errorf("declaring an amq.* exchange = %v, want *driver.AccessError 403", err)
	}
}

func testDeclareQueue(e *env) {
	t := e.t
	name := e.name("q")
	args := driver.Table{"x-message-ttl": int32(60000)}
	info := e.queue(e.admin, driver.Queue{Name: name, Durable: true, Args: args})
	if info.Name != name || info.Messages != 0 || info.Consumers != 0 {
		t.Errorf("declare queue reported %+v", info)
	}
	if _, err := e.admin.DeclareQueue(e.ctx, driver.Queue{Name: name, Durable: true, Args: args}); err != nil {
		t.Fatalf("redeclaring queue %q with the same settings: %v", name, err)
	}
	// Integer arguments compare by value whatever their width.
	if _, err := e.admin.DeclareQueue(e.ctx, driver.Queue{Name: name, Durable: true, Args: driver.Table{"x-message-ttl": int64(60000)}}); err != nil {
		t.Fatalf("redeclaring queue %q with the TTL as int64: %v", name, err)
	}
	var pe *driver.PreconditionError
	_, err := e.admin.DeclareQueue(e.ctx, driver.Queue{Name: name, Durable: false, Args: args})
	if !errors.As(err, &pe) {
		t.Fatalf("redeclaring queue %q non-durable = %v, want *driver.PreconditionError", name, err)
	}
	if !strings.Contains(pe.Detail, "durable") {
		t.Errorf("PreconditionError detail %q does not name 'durable'", pe.Detail)
	}
	_, err = e.admin.DeclareQueue(e.ctx, driver.Queue{Name: name, Durable: true, Args: driver.Table{"x-message-ttl": int32(1000)}})
	if !errors.As(err, &pe) {
		t.Fatalf("redeclaring queue %q with another TTL = %v, want *driver.PreconditionError", name, err)
	}
	if !strings.Contains(pe.Detail, "x-message-ttl") {
		t.Errorf("PreconditionError detail %q does not name 'x-message-ttl'", pe.Detail)
	}
	if err := e.admin.Ping(e.ctx); err != nil {
		t.Fatalf("ping after a refused declaration: %v", err)
	}
	if _, err := e.admin.InspectQueue(e.ctx, name); err != nil {
		t.Fatalf("inspect queue %q: %v", name, err)
	}
	if _, err := e.admin.InspectQueue(e.ctx, e.name("missing")); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("inspect of a missing queue = %v, want an error wrapping driver.ErrNotFound", err)
	}
	// A server-named queue.
	named := e.queue(e.admin, driver.Queue{Exclusive: true, AutoDelete: true})
	if _, err := e.admin.InspectQueue(e.ctx, named.Name); err != nil {
		t.Errorf("inspect server-named queue %q: %v", named.Name, err)
	}
}

func testQuorumRules(e *env) {
	if !e.caps.QuorumQueues {
		e.t.Skip("the driver does not report quorum queues")
	}
	t := e.t
	quorum := driver.Table{"x-queue-type": "quorum"}
	name := e.name("quorum")
	e.queue(e.admin, driver.Queue{Name: name, Durable: true, Args: quorum})
	if _, err := e.admin.DeclareQueue(e.ctx, driver.Queue{Name: name, Durable: true, Args: quorum}); err != nil {
		t.Fatalf("redeclaring quorum queue: %v", err)
	}
	for _, q := range []driver.Queue{
		{Name: e.name("quorum-exclusive"), Durable: true, Exclusive: true, Args: quorum},
		{Name: e.name("quorum-autodelete"), Durable: true, AutoDelete: true, Args: quorum},
	} {
		e.deleteQueueLater(q.Name)
		var pe *driver.PreconditionError
		if _, err := e.admin.DeclareQueue(e.ctx, q); !errors.As(err, &pe) {
			t.Errorf("declaring %+v = %v, want *driver.PreconditionError", q, err)
		}
	}
	// A classic queue is not a quorum queue.
	classic := e.simpleQueue("classic")
	var pe *driver.PreconditionError
	if _, err := e.admin.DeclareQueue(e.ctx, driver.Queue{Name: classic, Durable: true, Args: quorum}); !errors.As(err, &pe) {
		t.Errorf("redeclaring a classic queue as quorum = %v, want *driver.PreconditionError", err)
	}
}

func testDeleteAndInspect(e *env) {
	t := e.t
	q := e.simpleQueue("del")
	for i := range 3 {
		e.publish(e.admin, driver.Message{RoutingKey: q, Body: fmt.Appendf(nil, "%d", i)})
	}
	e.eventually("three messages in the queue", func() bool { return e.messages(e.admin, q) == 3 })
	n, err := e.admin.DeleteQueue(e.ctx, q)
	if err != nil || n != 3 {
		t.Fatalf("delete queue = %d, %v; want 3, nil", n, err)
	}
	if _, err := e.admin.InspectQueue(e.ctx, q); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("inspect of a deleted queue = %v, want driver.ErrNotFound", err)
	}
	if n, err := e.admin.DeleteQueue(e.ctx, q); err != nil || n != 0 {
		t.Fatalf("deleting a missing queue = %d, %v; want 0, nil", n, err)
	}
	ex := e.exchange("del", driver.Fanout)
	if err := e.admin.DeleteExchange(e.ctx, ex); err != nil {
		t.Fatalf("delete exchange: %v", err)
	}
	if err := e.admin.InspectExchange(e.ctx, ex); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("inspect of a deleted exchange = %v, want driver.ErrNotFound", err)
	}
}

func testDirectAndDefault(e *env) {
	t := e.t
	ex := e.exchange("direct", driver.Direct)
	q1, q2 := e.simpleQueue("d1"), e.simpleQueue("d2")
	e.bind(ex, q1, "red")
	e.bind(ex, q2, "red")
	e.bind(ex, q2, "blue")
	e.publish(e.admin, driver.Message{Exchange: ex, RoutingKey: "red", Body: []byte("red")})
	e.publish(e.admin, driver.Message{Exchange: ex, RoutingKey: "blue", Body: []byte("blue")})
	e.publish(e.admin, driver.Message{Exchange: ex, RoutingKey: "green", Body: []byte("green")})
	e.publish(e.admin, driver.Message{RoutingKey: q1, Body: []byte("default")})
	if got := e.takeAll(e.admin, q1, 2); !slices.Equal(got, []string{"default", "red"}) {
		t.Errorf("queue bound on red got %v", got)
	}
	if got := e.takeAll(e.admin, q2, 2); !slices.Equal(got, []string{"blue", "red"}) {
		t.Errorf("queue bound on red and blue got %v", got)
	}
}

func testTopic(e *env) {
	t := e.t
	ex := e.exchange("topic", driver.Topic)
	bindings := map[string]string{
		"star":   "order.*",
		"hash":   "order.#",
		"middle": "a.#.b",
		"all":    "#",
		"exact":  "order.new",
	}
	queues := map[string]string{}
	for q, key := range bindings {
		queues[q] = e.simpleQueue("topic-" + q)
		e.bind(ex, queues[q], key)
	}
	for _, key := range []string{"order.new", "order.new.eu", "order", "a.b", "a.x.y.b", "a.x", ""} {
		e.publish(e.admin, driver.Message{Exchange: ex, RoutingKey: key, Body: []byte("<" + key + ">")})
	}
	want := map[string][]string{
		"star":   {"<order.new>"},
		"hash":   {"<order.new.eu>", "<order.new>", "<order>"},
		"middle": {"<a.b>", "<a.x.y.b>"},
		"all":    {"<>", "<a.b>", "<a.x.y.b>", "<a.x>", "<order.new.eu>", "<order.new>", "<order>"},
		"exact":  {"<order.new>"},
	}
	for q, w := range want {
		slices.Sort(w)
		if got := e.takeAll(e.admin, queues[q], len(w)); !slices.Equal(got, w) {
			t.Errorf("queue bound on %q got %v, want %v", bindings[q], got, w)
		}
	}
}

func testFanout(e *env) {
	t := e.t
	ex := e.exchange("fanout", driver.Fanout)
	q1, q2 := e.simpleQueue("f1"), e.simpleQueue("f2")
	e.bind(ex, q1, "")
	e.bind(ex, q2, "ignored")
	e.publish(e.admin, driver.Message{Exchange: ex, RoutingKey: "any.key", Body: []byte("x")})
	for _, q := range []string{q1, q2} {
		if got := e.takeAll(e.admin, q, 1); !slices.Equal(got, []string{"x"}) {
			t.Errorf("fanout queue %q got %v", q, got)
		}
	}
}

func testUnbind(e *env) {
	t := e.t
	ex := e.exchange("unbind", driver.Direct)
	q := e.simpleQueue("unbind")
	e.bind(ex, q, "k")
	if err := e.admin.Unbind(e.ctx, driver.Binding{Exchange: ex, Queue: q, RoutingKey: "k"}); err != nil {
		t.Fatalf("unbind: %v", err)
	}
	e.publish(e.admin, driver.Message{Exchange: ex, RoutingKey: "k"})
	e.expectEmpty(e.admin, q)
	var re *driver.ReturnError
	if err := e.admin.Publish(e.ctx, driver.Message{Exchange: ex, RoutingKey: "k", Mandatory: true, MessageID: e.id()}); !errors.As(err, &re) {
		t.Errorf("mandatory publish after unbind = %v, want *driver.ReturnError", err)
	}
}

func testNoRoute(e *env) {
	t := e.t
	ex := e.exchange("noroute", driver.Direct)
	var re *driver.ReturnError
	err := e.admin.Publish(e.ctx, driver.Message{Exchange: ex, RoutingKey: "nobody", Mandatory: true, MessageID: e.id(), Body: []byte("x")})
	if !errors.As(err, &re) {
		t.Fatalf("mandatory unroutable publish = %v, want *driver.ReturnError", err)
	}
	if re.Code != 312 || re.Text != "NO_ROUTE" || re.Exchange != ex || re.RoutingKey != "nobody" {
		t.Errorf("ReturnError = %+v, want 312 NO_ROUTE for %q/%q", re, ex, "nobody")
	}
	if err := e.admin.Publish(e.ctx, driver.Message{Exchange: ex, RoutingKey: "nobody", Body: []byte("x")}); err != nil {
		t.Errorf("non-mandatory unroutable publish = %v, want nil (dropped)", err)
	}
	if err := e.admin.Publish(e.ctx, driver.Message{RoutingKey: e.name("no-such-queue"), Mandatory: true, MessageID: e.id()}); !errors.As(err, &re) || re.Code != 312 {
		t.Errorf("mandatory publish to a missing queue by the default exchange = %v, want 312 NO_ROUTE", err)
	}
	if err := e.admin.Publish(e.ctx, driver.Message{Exchange: e.name("no-such-exchange"), RoutingKey: "k"}); err == nil {
		t.Errorf("publish to a missing exchange succeeded")
	}
	// The connection still publishes after those failures.
	q := e.simpleQueue("after")
	e.publish(e.admin, driver.Message{RoutingKey: q, Mandatory: true, MessageID: e.id(), Body: []byte("ok")})
	if got := e.takeAll(e.admin, q, 1); !slices.Equal(got, []string{"ok"}) {
		t.Errorf("after the failed publishes the queue got %v", got)
	}
}

func testProperties(e *env) {
	t := e.t
	ex := e.exchange("props", driver.Direct)
	q := e.simpleQueue("props")
	e.bind(ex, q, "k")
	pub := e.conn()
	stamp := time.Unix(1700000000, 0)
	e.publish(pub, driver.Message{
		Exchange: ex, RoutingKey: "k",
		ContentType: "application/json", MessageID: "mid", CorrelationID: "cid", ReplyTo: "rto",
		Headers: driver.Table{
			"s":      "text",
			"i32":    int32(-7),
			"i64":    int64(1) << 40,
			"b":      true,
			"f":      float64(1.5),
			"bytes":  []byte{1, 2, 3},
			"t":      stamp,
			"nested": driver.Table{"inner": "v", "deep": driver.Table{"n": int32(1)}},
			"arr":    []any{"a", int32(2), driver.Table{"k": "v"}},
		},
		Body: []byte(`{"a":1}`),
	})
	d := e.get(e.admin, q)
	defer func() { _ = d.Ack() }()
	if d.Exchange != ex || d.RoutingKey != "k" || d.ContentType != "application/json" || d.MessageID != "mid" ||
		d.CorrelationID != "cid" || d.ReplyTo != "rto" || !d.Persistent || d.Redelivered || string(d.Body) != `{"a":1}` {
		t.Errorf("delivery properties %+v", d)
	}
	h := d.Headers
	if h["s"] != "text" || h["b"] != true || h["f"] != float64(1.5) {
		t.Errorf("scalar headers %#v", h)
	}
	if n, ok := asInt(h["i32"]); !ok || n != -7 {
		t.Errorf("int32 header = %#v", h["i32"])
	}
	if n, ok := asInt(h["i64"]); !ok || n != 1<<40 {
		t.Errorf("int64 header = %#v", h["i64"])
	}
	if b, ok := h["bytes"].([]byte); !ok || !slices.Equal(b, []byte{1, 2, 3}) {
		t.Errorf("byte-array header = %#v", h["bytes"])
	}
	if ts, ok := h["t"].(time.Time); !ok || !ts.Equal(stamp) {
		t.Errorf("timestamp header = %#v", h["t"])
	}
	nested, ok := h["nested"].(driver.Table)
	if !ok {
		t.Fatalf("nested header is a %T, want driver.Table", h["nested"])
	}
	if deep, ok := nested["deep"].(driver.Table); !ok || nested["inner"] != "v" {
		t.Errorf("nested table %#v", nested)
	} else if n, _ := asInt(deep["n"]); n != 1 {
		t.Errorf("doubly nested table %#v", deep)
	}
	arr, ok := h["arr"].([]any)
	if !ok || len(arr) != 3 || arr[0] != "a" {
		t.Fatalf("array header = %#v", h["arr"])
	}
	if _, ok := arr[2].(driver.Table); !ok {
		t.Errorf("table in an array is a %T, want driver.Table", arr[2])
	}
	// Transient messages come back non-persistent.
	e.publish(pub, driver.Message{Exchange: ex, RoutingKey: "k", Transient: true})
	d2 := e.get(e.admin, q)
	if d2.Persistent {
		t.Error("a transient message was delivered as persistent")
	}
	_ = d2.Ack()
}

func testConfirms(e *env) {
	if !e.caps.PublisherConfirms {
		e.t.Skip("the driver does not report publisher confirms")
	}
	q := e.simpleQueue("confirm")
	// Once Publish returns nil the broker holds the message.
	for i := range 5 {
		e.publish(e.admin, driver.Message{RoutingKey: q, Body: fmt.Appendf(nil, "%d", i)})
	}
	if got := e.takeAll(e.admin, q, 5); !slices.Equal(got, []string{"0", "1", "2", "3", "4"}) {
		e.t.Errorf("confirmed messages: %v", got)
	}
}

func testConcurrentConfirms(e *env) {
	if !e.caps.PublisherConfirms {
		e.t.Skip("the driver does not report publisher confirms")
	}
	t := e.t
	const goroutines, total = 16, 200
	q := e.simpleQueue("concurrent")
	pub := e.conn()
	var wg sync.WaitGroup
	errs := make(chan error, total)
	for g := range goroutines {
		wg.Go(func() {
			for i := g; i < total; i += goroutines {
				if err := pub.Publish(e.ctx, driver.Message{RoutingKey: q, Mandatory: true, MessageID: e.id(), Body: fmt.Appendf(nil, "%03d", i)}); err != nil {
					errs <- fmt.Errorf("message %d: %w", i, err)
				}
			}
		})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Errorf("concurrent publish: %v", err)
	}
	con := e.conn()
	s := e.consume(con, driver.ConsumeSpec{Queue: q, Prefetch: 50})
	seen := map[string]bool{}
	for len(seen) < total {
		d := e.recv(s)
		if seen[string(d.Body)] {
			t.Fatalf("message %q delivered twice", d.Body)
		}
		seen[string(d.Body)] = true
		if err := d.Ack(); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	e.noRecv(s, "every published message has arrived")
}

func testPublishBatch(e *env) {
	t := e.t
	q := e.simpleQueue("batch")
	ms := []driver.Message{
		{RoutingKey: q, Body: []byte("a")},
		{RoutingKey: e.name("nobody"), Mandatory: true, MessageID: e.id(), Body: []byte("lost")},
		{RoutingKey: q, Body: []byte("b")},
	}
	errs := e.admin.PublishBatch(e.ctx, ms)
	if len(errs) != len(ms) {
		t.Fatalf("PublishBatch returned %d errors for %d messages", len(errs), len(ms))
	}
	var re *driver.ReturnError
	if errs[0] != nil || !errors.As(errs[1], &re) || errs[2] != nil {
		t.Fatalf("PublishBatch errors = %v, want [nil, *ReturnError, nil]", errs)
	}
	if got := e.takeAll(e.admin, q, 2); !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("batch delivered %v", got)
	}
}

func testNackRequeue(e *env) {
	t := e.t
	q := e.simpleQueue("requeue")
	e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("once")})
	c := e.conn()
	s := e.consume(c, driver.ConsumeSpec{Queue: q, Prefetch: 1})
	d := e.recv(s)
	if d.Redelivered {
		t.Error("first delivery marked redelivered")
	}
	if d.ConsumerTag != s.Tag() {
		t.Errorf("delivery consumer tag %q, subscription tag %q", d.ConsumerTag, s.Tag())
	}
	if err := d.Nack(true); err != nil {
		t.Fatalf("nack with requeue: %v", err)
	}
	d = e.recv(s)
	if string(d.Body) != "once" || !d.Redelivered {
		t.Fatalf("after requeue got %q redelivered=%v, want %q redelivered", d.Body, d.Redelivered, "once")
	}
	if err := d.Ack(); err != nil {
		t.Fatalf("ack: %v", err)
	}
	e.eventually("the queue to be empty", func() bool { return e.messages(e.admin, q) == 0 })
}

// dlxSetup declares a dead-letter exchange and a queue bound to it on key.
func (e *env) dlxSetup(key string) (dlx, dlq string) {
	dlx = e.exchange("dlx", driver.Direct)
	dlq = e.simpleQueue("dlq")
	e.bind(dlx, dlq, key)
	return dlx, dlq
}

func testDeadLetterReject(e *env) {
	if !e.caps.DeadLettering {
		e.t.Skip("the driver does not report dead-lettering")
	}
	t := e.t
	dlx, dlq := e.dlxSetup("dead")
	src := e.name("reject-src")
	e.queue(e.admin, driver.Queue{Name: src, Durable: true, Args: driver.Table{
		"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "dead",
	}})
	e.publish(e.admin, driver.Message{RoutingKey: src, MessageID: "m-1", Body: []byte("bad"), Headers: driver.Table{"app": "kept"}})
	s := e.consume(e.conn(), driver.ConsumeSpec{Queue: src, Prefetch: 1})
	rejected := e.recv(s)
	if err := rejected.Nack(false); err != nil {
		t.Fatalf("nack without requeue: %v", err)
	}
	d := e.get(e.admin, dlq)
	defer func() { _ = d.Ack() }()
	if string(d.Body) != "bad" || d.MessageID != "m-1" || d.Headers["app"] != "kept" || d.RoutingKey != "dead" {
		t.Errorf("dead letter %+v", d)
	}
	x := e.firstDeath(d)
	if x["reason"] != "rejected" || x["queue"] != src {
		t.Errorf("x-death entry %#v, want reason rejected, queue %q", x, src)
	}
	if n, ok := asInt(x["count"]); !ok || n != 1 {
		t.Errorf("x-death count %#v", x["count"])
	}
	if d.Headers["x-first-death-queue"] != src || d.Headers["x-first-death-reason"] != "rejected" {
		t.Errorf("x-first-death headers %#v", d.Headers)
	}
	e.expectEmpty(e.admin, src)
}

func testTTLDeadLetter(e *env) {
	if !e.caps.DeadLettering {
		e.t.Skip("the driver does not report dead-lettering")
	}
	t := e.t
	dlx, dlq := e.dlxSetup("expired")
	src := e.name("ttl-src")
	e.queue(e.admin, driver.Queue{Name: src, Durable: true, Args: driver.Table{
		"x-message-ttl": int32(200), "x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "expired",
	}})
	// Nobody consumes src: the broker must expire the message by itself.
	e.publish(e.admin, driver.Message{RoutingKey: src, Body: []byte("late")})
	d := e.get(e.admin, dlq)
	defer func() { _ = d.Ack() }()
	if string(d.Body) != "late" || d.Exchange != dlx || d.RoutingKey != "expired" {
		t.Errorf("expired message %q via %q/%q", d.Body, d.Exchange, d.RoutingKey)
	}
	x := e.firstDeath(d)
	if x["reason"] != "expired" || x["queue"] != src {
		t.Errorf("x-death entry %#v, want reason expired, queue %q", x, src)
	}
	if keys, ok := x["routing-keys"].([]any); !ok || !slices.Contains(keys, any(src)) {
		t.Errorf("x-death routing-keys %#v, want [%q]", x["routing-keys"], src)
	}
	e.expectEmpty(e.admin, src)
}

func testRetryRung(e *env) {
	if !e.caps.DeadLettering {
		e.t.Skip("the driver does not report dead-lettering")
	}
	t := e.t
	// The retry shape of WIRE.md §5.1: a rung queue with a TTL dead-letters
	// back through the retry exchange to the source queue.
	retry := e.exchange("retry", driver.Direct)
	src := e.simpleQueue("orders")
	e.bind(retry, src, src)
	rung := e.name("orders.retry.200ms")
	e.queue(e.admin, driver.Queue{Name: rung, Durable: true, Args: driver.Table{
		"x-message-ttl": int64(200), "x-dead-letter-exchange": retry, "x-dead-letter-routing-key": src,
	}})
	e.publish(e.admin, driver.Message{RoutingKey: rung, Mandatory: true, MessageID: e.id(), Body: []byte("retry me")})
	d := e.get(e.admin, src)
	defer func() { _ = d.Ack() }()
	if string(d.Body) != "retry me" || d.RoutingKey != src {
		t.Errorf("returned message %q with routing key %q", d.Body, d.RoutingKey)
	}
	if x := e.firstDeath(d); x["reason"] != "expired" || x["queue"] != rung {
		t.Errorf("x-death entry %#v", x)
	}
}

func testPerMessageExpiration(e *env) {
	t := e.t
	plain := e.simpleQueue("exp-plain")
	e.publish(e.admin, driver.Message{RoutingKey: plain, Expiration: "100", Body: []byte("brief")})
	e.eventually("the message to expire", func() bool { return e.messages(e.admin, plain) == 0 })
	e.expectEmpty(e.admin, plain)

	if !e.caps.DeadLettering {
		return
	}
	dlx, dlq := e.dlxSetup("msg-expired")
	src := e.name("exp-src")
	e.queue(e.admin, driver.Queue{Name: src, Durable: true, Args: driver.Table{
		"x-dead-letter-exchange": dlx, "x-dead-letter-routing-key": "msg-expired",
	}})
	e.publish(e.admin, driver.Message{RoutingKey: src, Expiration: "100", Body: []byte("brief")})
	d := e.get(e.admin, dlq)
	defer func() { _ = d.Ack() }()
	if x := e.firstDeath(d); x["reason"] != "expired" || x["queue"] != src {
		t.Errorf("x-death entry %#v", x)
	}
}

func testPrefetch(e *env) {
	t := e.t
	q := e.simpleQueue("prefetch")
	for i := range 5 {
		e.publish(e.admin, driver.Message{RoutingKey: q, Body: fmt.Appendf(nil, "%d", i)})
	}
	s := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 2})
	first := e.recv(s)
	e.recv(s)
	e.noRecv(s, "prefetch 2 with two unacknowledged")
	if err := first.Ack(); err != nil {
		t.Fatalf("ack: %v", err)
	}
	third := e.recv(s)
	if string(third.Body) != "2" {
		t.Errorf("after one ack got %q, want %q", third.Body, "2")
	}
	e.noRecv(s, "prefetch 2 with two unacknowledged again")
}

func testGet(e *env) {
	t := e.t
	q := e.simpleQueue("get")
	if _, ok, err := e.admin.Get(e.ctx, q); ok || err != nil {
		t.Fatalf("get from an empty queue = ok %v, err %v; want false, nil", ok, err)
	}
	e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("one")})
	d := e.get(e.admin, q)
	if string(d.Body) != "one" || d.Redelivered || d.ConsumerTag != "" {
		t.Errorf("get = %+v", d)
	}
	if err := d.Nack(true); err != nil {
		t.Fatalf("nack with requeue: %v", err)
	}
	d = e.get(e.admin, q)
	if string(d.Body) != "one" || !d.Redelivered {
		t.Errorf("after requeue got %q redelivered=%v", d.Body, d.Redelivered)
	}
	if err := d.Ack(); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if _, ok, err := e.admin.Get(e.ctx, q); ok || err != nil {
		t.Fatalf("get after ack = ok %v, err %v; want false, nil", ok, err)
	}
	if _, _, err := e.admin.Get(e.ctx, e.name("missing")); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("get from a missing queue = %v, want driver.ErrNotFound", err)
	}
}

func testExclusiveQueue(e *env) {
	t := e.t
	owner := e.conn()
	other := e.conn()
	q := e.name("exclusive")
	e.queue(owner, driver.Queue{Name: q, Exclusive: true, AutoDelete: true})
	if _, err := owner.DeclareQueue(e.ctx, driver.Queue{Name: q, Exclusive: true, AutoDelete: true}); err != nil {
		t.Fatalf("owner redeclaring its exclusive queue: %v", err)
	}
	var ae *driver.AccessError
	_, err := other.DeclareQueue(e.ctx, driver.Queue{Name: q, Exclusive: true, AutoDelete: true})
	if !errors.As(err, &ae) || ae.Code != 405 {
		t.Fatalf("another connection declaring the exclusive queue = %v, want *driver.AccessError 405", err)
	}
	if _, err := other.Consume(e.ctx, driver.ConsumeSpec{Queue: q}); !errors.As(err, &ae) || ae.Code != 405 {
		t.Fatalf("another connection consuming the exclusive queue = %v, want *driver.AccessError 405", err)
	}
	// Anybody may publish to it.
	e.publish(other, driver.Message{RoutingKey: q, Mandatory: true, MessageID: e.id(), Body: []byte("hi")})
	if got := e.takeAll(owner, q, 1); !slices.Equal(got, []string{"hi"}) {
		t.Errorf("exclusive queue got %v", got)
	}
	if err := owner.Close(); err != nil {
		t.Fatalf("close owner: %v", err)
	}
	e.eventually("the exclusive queue to go with its connection", func() bool {
		_, err := other.InspectQueue(e.ctx, q)
		return errors.Is(err, driver.ErrNotFound)
	})
}

func testAutoDeleteQueue(e *env) {
	t := e.t
	q := e.name("autodelete")
	e.queue(e.admin, driver.Queue{Name: q, Durable: true, AutoDelete: true})
	c := e.conn()
	s1 := e.consume(c, driver.ConsumeSpec{Queue: q})
	s2 := e.consume(c, driver.ConsumeSpec{Queue: q})
	if err := s1.Cancel(e.ctx); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if _, err := e.admin.InspectQueue(e.ctx, q); err != nil {
		t.Fatalf("auto-delete queue gone while a consumer remains: %v", err)
	}
	if err := s2.Cancel(e.ctx); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	e.eventually("the auto-delete queue to go with its last consumer", func() bool {
		_, err := e.admin.InspectQueue(e.ctx, q)
		return errors.Is(err, driver.ErrNotFound)
	})
}

func testCancel(e *env) {
	t := e.t
	q := e.simpleQueue("cancel")
	for i := range 3 {
		e.publish(e.admin, driver.Message{RoutingKey: q, Body: fmt.Appendf(nil, "%d", i)})
	}
	s := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 1})
	d := e.recv(s)
	if err := s.Cancel(e.ctx); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	if extra := e.drainUntilClosed(s); len(extra) != 0 {
		t.Errorf("prefetch 1 with one unacknowledged, yet %d more arrived after Cancel", len(extra))
	}
	if err := d.Ack(); err != nil {
		t.Fatalf("ack after Cancel: %v", err)
	}
	e.eventually("two messages left on the queue", func() bool { return e.messages(e.admin, q) == 2 })
	if err := s.Close(); err != nil {
		t.Errorf("close after Cancel: %v", err)
	}
	if got := e.takeAll(e.admin, q, 2); !slices.Equal(got, []string{"1", "2"}) {
		t.Errorf("left on the queue: %v", got)
	}
}

func testCloseRequeues(e *env) {
	t := e.t
	q := e.simpleQueue("close")
	e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("a")})
	e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("b")})
	s := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 2})
	d1, d2 := e.recv(s), e.recv(s)
	if err := d2.Ack(); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	e.drainUntilClosed(s)
	if err := d1.Ack(); !errors.Is(err, driver.ErrChannelClosed) {
		t.Errorf("ack after Close = %v, want driver.ErrChannelClosed", err)
	}
	d := e.get(e.admin, q)
	if string(d.Body) != string(d1.Body) || !d.Redelivered {
		t.Errorf("after Close got %q redelivered=%v, want %q redelivered", d.Body, d.Redelivered, d1.Body)
	}
	_ = d.Ack()
	e.expectEmpty(e.admin, q)
}

func testConnClose(e *env) {
	t := e.t
	q := e.simpleQueue("connclose")
	e.publish(e.admin, driver.Message{RoutingKey: q, Body: []byte("x")})
	c := e.conn()
	s := e.consume(c, driver.ConsumeSpec{Queue: q})
	d := e.recv(s)
	if err := c.Close(); err != nil {
		t.Fatalf("close: %v", err)
	}
	e.drainUntilClosed(s)
	if err := d.Ack(); !errors.Is(err, driver.ErrChannelClosed) {
		t.Errorf("ack after the connection closed = %v, want driver.ErrChannelClosed", err)
	}
	if err := c.Publish(e.ctx, driver.Message{RoutingKey: q}); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("publish on a closed connection = %v, want driver.ErrClosed", err)
	}
	if _, err := c.DeclareQueue(e.ctx, driver.Queue{Name: q, Durable: true}); !errors.Is(err, driver.ErrClosed) {
		t.Errorf("declare on a closed connection = %v, want driver.ErrClosed", err)
	}
	if err := c.Ping(e.ctx); err == nil {
		t.Error("ping on a closed connection succeeded")
	}
	back := e.get(e.admin, q)
	if !back.Redelivered {
		t.Error("a delivery unsettled at connection close came back without the redelivered flag")
	}
	_ = back.Ack()
}

func testRoundRobin(e *env) {
	t := e.t
	q := e.simpleQueue("roundrobin")
	s1 := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 1})
	s2 := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 1})
	e.eventually("two consumers on the queue", func() bool {
		info, err := e.admin.InspectQueue(e.ctx, q)
		return err == nil && info.Consumers == 2
	})
	const n = 10
	for i := range n {
		e.publish(e.admin, driver.Message{RoutingKey: q, Body: fmt.Appendf(nil, "%02d", i)})
	}
	counts := map[string]int{}
	seen := map[string]bool{}
	deadline := time.After(waitFor)
	for len(seen) < n {
		var d driver.Delivery
		var ok bool
		var who string
		select {
		case d, ok = <-s1.Deliveries():
			who = "first"
		case d, ok = <-s2.Deliveries():
			who = "second"
		case <-deadline:
			t.Fatalf("only %d of %d messages arrived", len(seen), n)
		}
		if !ok {
			t.Fatalf("the %s subscription's channel closed", who)
		}
		if seen[string(d.Body)] {
			t.Fatalf("message %q delivered twice", d.Body)
		}
		seen[string(d.Body)] = true
		counts[who]++
		if err := d.Ack(); err != nil {
			t.Fatalf("ack: %v", err)
		}
	}
	if counts["first"] == 0 || counts["second"] == 0 {
		t.Errorf("deliveries per subscription %v: want both to get some", counts)
	}
}

// testReceive checks a driver.Receiver: readers calling Receive at once
// share the deliveries, each exactly once; after Cancel every reader gets
// false once what was sent has been handed up; a reader blocked on an empty
// queue gets false when the subscription is closed.
func testReceive(e *env) {
	t := e.t
	q := e.simpleQueue("receive")
	s := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 10})
	r, ok := s.(driver.Receiver)
	if !ok {
		t.Skip("the driver's subscriptions do not implement driver.Receiver")
	}
	const n, readers = 50, 4
	for i := range n {
		e.publish(e.admin, driver.Message{RoutingKey: q, Body: fmt.Appendf(nil, "%d", i)})
	}
	var (
		mu   sync.Mutex
		seen = map[string]int{}
		wg   sync.WaitGroup
	)
	for range readers {
		wg.Go(func() {
			for {
				d, ok := r.Receive()
				if !ok {
					return
				}
				mu.Lock()
				seen[string(d.Body)]++
				mu.Unlock()
				if err := d.Ack(); err != nil {
					t.Errorf("ack: %v", err)
				}
			}
		})
	}
	e.eventually("every message received", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) == n
	})
	if err := s.Cancel(e.ctx); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	done := make(chan struct{})
	go func() { wg.Wait(); close(done) }()
	select {
	case <-done:
	case <-time.After(waitFor):
		t.Fatalf("Receive still blocked %v after Cancel", waitFor)
	}
	for body, times := range seen {
		if times != 1 {
			t.Errorf("message %s received %d times", body, times)
		}
	}
	if err := s.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	e.expectEmpty(e.admin, q)

	// A reader waiting on an empty queue is released by Close.
	s2 := e.consume(e.conn(), driver.ConsumeSpec{Queue: q, Prefetch: 1})
	r2 := s2.(driver.Receiver)
	got := make(chan bool, 1)
	go func() {
		_, ok := r2.Receive()
		got <- ok
	}()
	time.Sleep(quiet)
	if err := s2.Close(); err != nil {
		t.Errorf("close: %v", err)
	}
	select {
	case ok := <-got:
		if ok {
			t.Error("Receive on an empty, closed subscription returned a delivery")
		}
	case <-time.After(waitFor):
		t.Fatalf("Receive still blocked %v after Close", waitFor)
	}
}
