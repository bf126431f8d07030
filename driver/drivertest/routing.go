package drivertest

import (
	"errors"
	"slices"

	"github.com/acemq/acemq/driver"
)

// Routing through the direct, topic and fanout exchanges and the default
// exchange, and NO_ROUTE returns.

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
