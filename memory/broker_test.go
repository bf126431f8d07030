package memory

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
)

func TestRegisteredAndSharedByURL(t *testing.T) {
	url := newURL(t)
	d, err := driver.Lookup(url)
	if err != nil {
		t.Fatalf("lookup: %v", err)
	}
	a, err := d.Open(ctx, driver.Config{URLs: []string{url}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	b := dial(t, url)
	other := fresh(t)

	mustQueue(t, a, driver.Queue{Name: "shared", Durable: true})
	mustPublish(t, a, driver.Message{RoutingKey: "shared", Body: []byte("x")})
	if n := messages(t, b, "shared"); n != 1 {
		t.Fatalf("second connection sees %d messages, want 1", n)
	}
	if _, err := other.InspectQueue(ctx, "shared"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("another broker's inspect = %v, want ErrNotFound", err)
	}
}

func TestOpenErrors(t *testing.T) {
	if _, err := (Driver{}).Open(ctx, driver.Config{}); err == nil {
		t.Error("open with no URL succeeded")
	}
	if _, err := (Driver{}).Open(ctx, driver.Config{URLs: []string{"amqp://x"}}); err == nil {
		t.Error("open of amqp URL succeeded")
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if _, err := (Driver{}).Open(cctx, driver.Config{URLs: []string{"memory://x"}}); !errors.Is(err, context.Canceled) {
		t.Errorf("open with cancelled context = %v", err)
	}
}

func TestResetEmptiesBrokerAndClosesConns(t *testing.T) {
	url := newURL(t)
	c := dial(t, url)
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	s := mustConsume(t, c, driver.ConsumeSpec{Queue: "q"})
	Reset(strings.TrimPrefix(url, "memory://"))
	waitClosed(t, s)
	if err := c.Ping(ctx); !errors.Is(err, driver.ErrClosed) {
		t.Fatalf("ping after reset = %v, want ErrClosed", err)
	}
	c2 := dial(t, url)
	if _, err := c2.InspectQueue(ctx, "q"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("queue survived reset: %v", err)
	}
}

func TestExchangeDeclareRules(t *testing.T) {
	c := fresh(t)
	var ae *driver.AccessError
	for _, name := range []string{"", "amq.direct", "amq.mine"} {
		err := c.DeclareExchange(ctx, driver.Exchange{Name: name, Kind: driver.Direct})
		if !errors.As(err, &ae) || ae.Code != 403 {
			t.Errorf("declare exchange %q = %v, want 403 ACCESS_REFUSED", name, err)
		}
	}
	if err := c.InspectExchange(ctx, "amq.topic"); err != nil {
		t.Errorf("inspect amq.topic: %v", err)
	}
	if err := c.InspectExchange(ctx, ""); err != nil {
		t.Errorf("inspect default exchange: %v", err)
	}
	if err := c.DeclareExchange(ctx, driver.Exchange{Name: "x", Kind: "bogus"}); err == nil {
		t.Error("unknown exchange kind accepted")
	}
	mustExchange(t, c, "x", driver.Direct)
	mustExchange(t, c, "x", driver.Direct)
	cases := []struct {
		e    driver.Exchange
		want string
	}{
		{driver.Exchange{Name: "x", Kind: driver.Topic, Durable: true}, "'type'"},
		{driver.Exchange{Name: "x", Kind: driver.Direct}, "'durable'"},
		{driver.Exchange{Name: "x", Kind: driver.Direct, Durable: true, AutoDelete: true}, "'auto_delete'"},
		{driver.Exchange{Name: "x", Kind: driver.Direct, Durable: true, Internal: true}, "'internal'"},
		{driver.Exchange{Name: "x", Kind: driver.Direct, Durable: true, Args: driver.Table{"alternate-exchange": "ae"}}, "'alternate-exchange'"},
	}
	for _, tc := range cases {
		var pe *driver.PreconditionError
		err := c.DeclareExchange(ctx, tc.e)
		if !errors.As(err, &pe) || pe.Kind != "exchange" || pe.Name != "x" || !strings.Contains(pe.Detail, tc.want) {
			t.Errorf("redeclare %+v = %v, want PreconditionError naming %s", tc.e, err, tc.want)
		}
	}
	if err := c.InspectExchange(ctx, "missing"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("inspect missing exchange = %v", err)
	}
	if err := c.DeleteExchange(ctx, "x"); err != nil {
		t.Fatal(err)
	}
	if err := c.DeleteExchange(ctx, "x"); err != nil {
		t.Errorf("delete missing exchange = %v, want nil", err)
	}
	if err := c.DeleteExchange(ctx, ""); !errors.As(err, &ae) {
		t.Errorf("delete default exchange = %v, want AccessError", err)
	}
}

func TestQueueRedeclareArguments(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true, Args: driver.Table{"x-message-ttl": int32(200)}})
	// Integer widths are one type class.
	for _, v := range []any{int16(200), int64(200), uint16(200), uint32(200)} {
		if _, err := c.DeclareQueue(ctx, driver.Queue{Name: "q", Durable: true, Args: driver.Table{"x-message-ttl": v}}); err != nil {
			t.Errorf("redeclare with %T(200): %v", v, err)
		}
	}
	var pe *driver.PreconditionError
	_, err := c.DeclareQueue(ctx, driver.Queue{Name: "q", Durable: true, Args: driver.Table{"x-message-ttl": int64(300)}})
	want := "inequivalent arg 'x-message-ttl' for queue 'q' in vhost '/': received the value '300' of type 'long' but current is the value '200' of type 'signedint'"
	if !errors.As(err, &pe) || pe.Detail != want || pe.Kind != "queue" || pe.Name != "q" {
		t.Fatalf("different ttl: %v\nwant detail %s", err, want)
	}
	_, err = c.DeclareQueue(ctx, driver.Queue{Name: "q", Durable: true})
	if !errors.As(err, &pe) || !strings.Contains(pe.Detail, "received none but current is the value '200'") {
		t.Fatalf("missing ttl: %v", err)
	}
	_, err = c.DeclareQueue(ctx, driver.Queue{Name: "q", Args: driver.Table{"x-message-ttl": int32(200)}})
	if !errors.As(err, &pe) || !strings.Contains(pe.Detail, "'durable'") {
		t.Fatalf("different durable: %v", err)
	}
	_, err = c.DeclareQueue(ctx, driver.Queue{Name: "q", Durable: true, AutoDelete: true, Args: driver.Table{"x-message-ttl": int32(200)}})
	if !errors.As(err, &pe) || !strings.Contains(pe.Detail, "'auto_delete'") {
		t.Fatalf("different auto-delete: %v", err)
	}
	_, err = c.DeclareQueue(ctx, driver.Queue{Name: "q", Durable: true, Args: driver.Table{"x-message-ttl": int32(200), "x-dead-letter-exchange": "d"}})
	if !errors.As(err, &pe) || !strings.Contains(pe.Detail, "'x-dead-letter-exchange'") {
		t.Fatalf("extra argument: %v", err)
	}
	var ae *driver.AccessError
	_, err = c.DeclareQueue(ctx, driver.Queue{Name: "q", Durable: true, Exclusive: true, Args: driver.Table{"x-message-ttl": int32(200)}})
	if !errors.As(err, &ae) || ae.Code != 405 {
		t.Fatalf("different exclusive: %v, want 405 as RabbitMQ", err)
	}

	// x-queue-type classic is the same as absent; quorum is not.
	mustQueue(t, c, driver.Queue{Name: "c", Durable: true})
	mustQueue(t, c, driver.Queue{Name: "c", Durable: true, Args: driver.Table{"x-queue-type": "classic"}})
	_, err = c.DeclareQueue(ctx, driver.Queue{Name: "c", Durable: true, Args: driver.Table{"x-queue-type": "quorum"}})
	if !errors.As(err, &pe) || !strings.Contains(pe.Detail, "'x-queue-type'") {
		t.Fatalf("classic redeclared quorum: %v", err)
	}
	// Nested tables and arrays compare by value.
	args := driver.Table{"x-custom": driver.Table{"a": []any{int32(1), "b"}}}
	mustQueue(t, c, driver.Queue{Name: "n", Args: args, Durable: true})
	mustQueue(t, c, driver.Queue{Name: "n", Durable: true, Args: driver.Table{"x-custom": driver.Table{"a": []any{int64(1), "b"}}}})
	if _, err := c.DeclareQueue(ctx, driver.Queue{Name: "n", Durable: true, Args: driver.Table{"x-custom": driver.Table{"a": []any{int64(2), "b"}}}}); !errors.As(err, &pe) {
		t.Fatalf("nested difference: %v", err)
	}
}

func TestQueueDeclareValidation(t *testing.T) {
	c := fresh(t)
	var pe *driver.PreconditionError
	var ae *driver.AccessError
	bad := []driver.Queue{
		{Name: "a", Durable: true, Exclusive: true, Args: driver.Table{"x-queue-type": "quorum"}},
		{Name: "a", Durable: true, AutoDelete: true, Args: driver.Table{"x-queue-type": "quorum"}},
		{Name: "a", Args: driver.Table{"x-queue-type": "quorum"}},
		{Name: "a", Args: driver.Table{"x-queue-type": "bogus"}},
		{Name: "a", Args: driver.Table{"x-message-ttl": "200"}},
		{Name: "a", Args: driver.Table{"x-message-ttl": int32(-1)}},
		{Name: "a", Args: driver.Table{"x-dead-letter-routing-key": "k"}},
		{Name: "a", Args: driver.Table{"x-dead-letter-exchange": int32(1)}},
	}
	for _, q := range bad {
		if _, err := c.DeclareQueue(ctx, q); !errors.As(err, &pe) {
			t.Errorf("declare %+v = %v, want PreconditionError", q, err)
		}
	}
	for _, q := range []driver.Queue{
		{Name: "a", Durable: true, Args: driver.Table{"x-queue-type": "stream", "x-message-ttl": int32(1)}},
		{Name: "a", Args: driver.Table{"x-max-length": int32(1)}},
		{Name: "a", Args: driver.Table{"x-max-age": "7D"}}, // only streams take it
		{Name: "a", Args: driver.Table{"x-custom": 7}},     // Go int has no AMQP width
	} {
		if _, err := c.DeclareQueue(ctx, q); err == nil {
			t.Errorf("declare %+v succeeded", q)
		}
	}
	if _, err := c.DeclareQueue(ctx, driver.Queue{Name: "amq.q", Durable: true}); !errors.As(err, &ae) || ae.Code != 403 {
		t.Errorf("amq. queue = %v", err)
	}
	info := mustQueue(t, c, driver.Queue{Durable: true, Args: driver.Table{"x-queue-type": "quorum"}})
	if !strings.HasPrefix(info.Name, "amq.gen-") {
		t.Errorf("server-named queue %q", info.Name)
	}
	if _, err := c.InspectQueue(ctx, info.Name); err != nil {
		t.Errorf("inspect server-named: %v", err)
	}
	if _, err := c.InspectQueue(ctx, "missing"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("inspect missing = %v", err)
	}
}

func TestDefaultExchangeAndDirect(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "q1", Durable: true})
	mustQueue(t, c, driver.Queue{Name: "q2", Durable: true})
	mustExchange(t, c, "d", driver.Direct)
	mustBind(t, c, "d", "q1", "k")
	mustBind(t, c, "d", "q2", "k")
	mustBind(t, c, "d", "q2", "k") // idempotent
	mustPublish(t, c, driver.Message{Exchange: "d", RoutingKey: "k", Body: []byte("1")})
	mustPublish(t, c, driver.Message{RoutingKey: "q1", Body: []byte("2")})
	if n := messages(t, c, "q1"); n != 2 {
		t.Errorf("q1 has %d, want 2", n)
	}
	if n := messages(t, c, "q2"); n != 1 {
		t.Errorf("q2 has %d, want 1 (one binding, however often bound)", n)
	}
	d := mustGet(t, c, "q1")
	if d.Exchange != "d" || d.RoutingKey != "k" || string(d.Body) != "1" || !d.Persistent {
		t.Errorf("delivery %+v", d)
	}
	d = mustGet(t, c, "q1")
	if d.Exchange != "" || d.RoutingKey != "q1" {
		t.Errorf("default exchange delivery %+v", d)
	}
	var ae *driver.AccessError
	if err := c.Bind(ctx, driver.Binding{Exchange: "", Queue: "q1", RoutingKey: "q1"}); !errors.As(err, &ae) {
		t.Errorf("bind to default exchange = %v", err)
	}
	if err := c.Bind(ctx, driver.Binding{Exchange: "nope", Queue: "q1"}); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("bind to missing exchange = %v", err)
	}
	if err := c.Bind(ctx, driver.Binding{Exchange: "d", Queue: "nope"}); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("bind missing queue = %v", err)
	}
	if err := c.Unbind(ctx, driver.Binding{Exchange: "d", Queue: "q1", RoutingKey: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := c.Unbind(ctx, driver.Binding{Exchange: "d", Queue: "q1", RoutingKey: "k"}); err != nil {
		t.Errorf("second unbind = %v", err)
	}
	mustPublish(t, c, driver.Message{Exchange: "d", RoutingKey: "k", Body: []byte("3")})
	if n := messages(t, c, "q1"); n != 0 {
		t.Errorf("q1 got %d after unbind", n)
	}
}

func TestTopicMatching(t *testing.T) {
	cases := []struct {
		pattern, key string
		want         bool
	}{
		{"#", "", true},
		{"#", "a", true},
		{"#", "a.b.c", true},
		{"*", "", false},
		{"*", "a", true},
		{"*", "a.b", false},
		{"", "", true},
		{"", "a", false},
		{"a", "", false},
		{"a.*", "a", false},
		{"a.*", "a.b", true},
		{"a.*", "a.b.c", false},
		{"a.#", "a", true},
		{"a.#", "a.b.c", true},
		{"#.a", "a", true},
		{"#.a", "x.y.a", true},
		{"#.a", "x.a.y", false},
		{"a.#.b", "a.b", true},
		{"a.#.b", "a.x.b", true},
		{"a.#.b", "a.x.y.b", true},
		{"a.#.b", "a.x.y", false},
		{"a.#.b", "a.b.b", true},
		{"a.*.b", "a.b", false},
		{"*.*", "a.b", true},
		{"#.#", "", true},
		{"#.*", "", false},
		{"#.*", "a.b", true},
		{"order.*", "order.", true}, // an empty word is a word
		{"a.#.#.b", "a.b", true},
		{"a.b", "a.b", true},
		{"a.b", "a.c", false},
	}
	for _, tc := range cases {
		if got := topicMatch(tc.pattern, tc.key); got != tc.want {
			t.Errorf("topicMatch(%q, %q) = %v, want %v", tc.pattern, tc.key, got, tc.want)
		}
	}
}

func TestTopicFanoutHeadersExchanges(t *testing.T) {
	c := fresh(t)
	for _, q := range []string{"star", "hash", "fan1", "fan2", "hall", "hany"} {
		mustQueue(t, c, driver.Queue{Name: q, Durable: true})
	}
	mustExchange(t, c, "t", driver.Topic)
	mustBind(t, c, "t", "star", "order.*")
	mustBind(t, c, "t", "hash", "order.#")
	mustBind(t, c, "t", "hash", "#") // two matching bindings: still one copy
	mustPublish(t, c, driver.Message{Exchange: "t", RoutingKey: "order.new"})
	mustPublish(t, c, driver.Message{Exchange: "t", RoutingKey: "order.new.eu"})
	mustPublish(t, c, driver.Message{Exchange: "t", RoutingKey: ""})
	if n := messages(t, c, "star"); n != 1 {
		t.Errorf("star: %d, want 1", n)
	}
	if n := messages(t, c, "hash"); n != 3 {
		t.Errorf("hash: %d, want 3", n)
	}

	mustExchange(t, c, "f", driver.Fanout)
	mustBind(t, c, "f", "fan1", "ignored")
	mustBind(t, c, "f", "fan2", "")
	mustPublish(t, c, driver.Message{Exchange: "f", RoutingKey: "anything"})
	if messages(t, c, "fan1") != 1 || messages(t, c, "fan2") != 1 {
		t.Error("fanout did not reach both queues")
	}

	mustExchange(t, c, "h", driver.Headers)
	if err := c.Bind(ctx, driver.Binding{Exchange: "h", Queue: "hall", Args: driver.Table{"x-match": "all", "a": "1", "b": int32(2)}}); err != nil {
		t.Fatal(err)
	}
	if err := c.Bind(ctx, driver.Binding{Exchange: "h", Queue: "hany", Args: driver.Table{"x-match": "any", "a": "1", "b": int32(2)}}); err != nil {
		t.Fatal(err)
	}
	var pe *driver.PreconditionError
	if err := c.Bind(ctx, driver.Binding{Exchange: "h", Queue: "hany", Args: driver.Table{"x-match": "some"}}); !errors.As(err, &pe) {
		t.Errorf("bad x-match = %v", err)
	}
	mustPublish(t, c, driver.Message{Exchange: "h", Headers: driver.Table{"a": "1", "b": int64(2)}})
	mustPublish(t, c, driver.Message{Exchange: "h", Headers: driver.Table{"a": "1"}})
	mustPublish(t, c, driver.Message{Exchange: "h", Headers: driver.Table{"c": "1"}})
	if n := messages(t, c, "hall"); n != 1 {
		t.Errorf("headers all: %d, want 1", n)
	}
	if n := messages(t, c, "hany"); n != 2 {
		t.Errorf("headers any: %d, want 2", n)
	}
}

func TestPublishErrors(t *testing.T) {
	c := fresh(t)
	var re *driver.ReturnError
	err := c.Publish(ctx, driver.Message{RoutingKey: "nowhere", Mandatory: true})
	if !errors.As(err, &re) || re.Code != 312 || re.Text != "NO_ROUTE" || re.RoutingKey != "nowhere" {
		t.Fatalf("mandatory unroutable = %v", err)
	}
	if err := c.Publish(ctx, driver.Message{RoutingKey: "nowhere"}); err != nil {
		t.Fatalf("non-mandatory unroutable = %v, want nil", err)
	}
	mustExchange(t, c, "e", driver.Direct)
	if err := c.Publish(ctx, driver.Message{Exchange: "e", RoutingKey: "k", Mandatory: true}); !errors.As(err, &re) || re.Exchange != "e" {
		t.Fatalf("mandatory unbound = %v", err)
	}
	err = c.Publish(ctx, driver.Message{Exchange: "missing", RoutingKey: "k"})
	if !errors.Is(err, driver.ErrNotFound) || !strings.Contains(err.Error(), "404") {
		t.Fatalf("missing exchange = %v", err)
	}
	if err := c.Publish(ctx, driver.Message{RoutingKey: "k", Expiration: "soon"}); err == nil {
		t.Error("bad expiration accepted")
	}
	if err := c.Publish(ctx, driver.Message{RoutingKey: "k", Headers: driver.Table{"n": 1}}); err == nil {
		t.Error("Go int header accepted")
	}
	if err := c.DeclareExchange(ctx, driver.Exchange{Name: "int", Kind: driver.Fanout, Internal: true}); err != nil {
		t.Fatal(err)
	}
	var ae *driver.AccessError
	if err := c.Publish(ctx, driver.Message{Exchange: "int"}); !errors.As(err, &ae) {
		t.Errorf("publish to internal = %v", err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Publish(cctx, driver.Message{RoutingKey: "k"}); !errors.Is(err, context.Canceled) {
		t.Errorf("cancelled publish = %v", err)
	}
	errs := c.PublishBatch(ctx, []driver.Message{
		{RoutingKey: "nowhere"},
		{RoutingKey: "nowhere", Mandatory: true},
		{Exchange: "missing"},
	})
	if len(errs) != 3 || errs[0] != nil || !errors.As(errs[1], &re) || !errors.Is(errs[2], driver.ErrNotFound) {
		t.Errorf("batch errors = %v", errs)
	}
}

func TestPublishCopiesBodyAndHeaders(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	body := []byte("hello")
	inner := driver.Table{"k": "v"}
	arr := []any{driver.Table{"x": int32(1)}, []byte("b")}
	h := driver.Table{"nested": inner, "arr": arr}
	mustPublish(t, c, driver.Message{RoutingKey: "q", Body: body, Headers: h})
	body[0] = 'J'
	inner["k"] = "changed"
	arr[0].(driver.Table)["x"] = int32(2)
	arr[1].([]byte)[0] = 'c'
	h["new"] = "x"
	d := mustGet(t, c, "q")
	if string(d.Body) != "hello" {
		t.Errorf("body %q", d.Body)
	}
	if _, ok := d.Headers["new"]; ok {
		t.Error("header added after publish is visible")
	}
	if d.Headers["nested"].(driver.Table)["k"] != "v" {
		t.Error("nested table shared with publisher")
	}
	a := d.Headers["arr"].([]any)
	if a[0].(driver.Table)["x"] != int32(2-1) || string(a[1].([]byte)) != "b" {
		t.Errorf("array shared with publisher: %v", a)
	}
	// The consumer's copy does not alias the broker's either.
	d.Body[0] = 'X'
	d.Headers["nested"].(driver.Table)["k"] = "mutated"
	if err := d.Nack(true); err != nil {
		t.Fatal(err)
	}
	d = mustGet(t, c, "q")
	if string(d.Body) != "hello" || d.Headers["nested"].(driver.Table)["k"] != "v" || !d.Redelivered {
		t.Errorf("requeued message changed: %q %v redelivered=%v", d.Body, d.Headers, d.Redelivered)
	}
}

func TestPropertiesRoundTrip(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	mustPublish(t, c, driver.Message{
		RoutingKey: "q", Transient: true, ContentType: "application/json", MessageID: "id",
		CorrelationID: "corr", ReplyTo: "r", Body: []byte("{}"),
	})
	d := mustGet(t, c, "q")
	if d.Persistent || d.ContentType != "application/json" || d.MessageID != "id" ||
		d.CorrelationID != "corr" || d.ReplyTo != "r" || d.ConsumerTag != "" || d.DeliveryTag == 0 {
		t.Errorf("delivery %+v", d)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
}

func TestConsumeRoundRobinAndOrder(t *testing.T) {
	url := newURL(t)
	c := dial(t, url)
	c2 := dial(t, url)
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	s1 := mustConsume(t, c, driver.ConsumeSpec{Queue: "q", Tag: "one"})
	s2 := mustConsume(t, c2, driver.ConsumeSpec{Queue: "q"})
	if !strings.HasPrefix(s2.Tag(), "amq.ctag-") {
		t.Errorf("generated tag %q", s2.Tag())
	}
	if info, _ := c.InspectQueue(ctx, "q"); info.Consumers != 2 {
		t.Errorf("consumers = %d", info.Consumers)
	}
	for i := range 10 {
		mustPublish(t, c, driver.Message{RoutingKey: "q", Body: fmt.Appendf(nil, "%d", i)})
	}
	var got1, got2 []string
	for range 5 {
		d := recv(t, s1)
		if d.ConsumerTag != "one" {
			t.Errorf("consumer tag %q", d.ConsumerTag)
		}
		got1 = append(got1, string(d.Body))
		_ = d.Ack()
		d = recv(t, s2)
		got2 = append(got2, string(d.Body))
		_ = d.Ack()
	}
	if !slices.Equal(got1, []string{"0", "2", "4", "6", "8"}) || !slices.Equal(got2, []string{"1", "3", "5", "7", "9"}) {
		t.Errorf("round-robin: %v / %v", got1, got2)
	}
}

func TestPrefetch(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	for i := range 5 {
		mustPublish(t, c, driver.Message{RoutingKey: "q", Body: fmt.Appendf(nil, "%d", i)})
	}
	s := mustConsume(t, c, driver.ConsumeSpec{Queue: "q", Prefetch: 2})
	a, b := recv(t, s), recv(t, s)
	noRecv(t, s, 50*time.Millisecond)
	if n := messages(t, c, "q"); n != 3 {
		t.Errorf("ready = %d, want 3", n)
	}
	if err := a.Ack(); err != nil {
		t.Fatal(err)
	}
	d := recv(t, s)
	if string(d.Body) != "2" {
		t.Errorf("third delivery %q", d.Body)
	}
	noRecv(t, s, 50*time.Millisecond)
	if err := b.Nack(false); err != nil { // dropped: no DLX
		t.Fatal(err)
	}
	d = recv(t, s)
	if string(d.Body) != "3" {
		t.Errorf("fourth delivery %q", d.Body)
	}
	if _, err := c.Consume(ctx, driver.ConsumeSpec{Queue: "q", Prefetch: -1}); err == nil {
		t.Error("negative prefetch accepted")
	}
}

func TestNackRequeueRedelivers(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	mustPublish(t, c, driver.Message{RoutingKey: "q", Body: []byte("a")})
	mustPublish(t, c, driver.Message{RoutingKey: "q", Body: []byte("b")})
	s := mustConsume(t, c, driver.ConsumeSpec{Queue: "q", Prefetch: 1})
	d := recv(t, s)
	if d.Redelivered || string(d.Body) != "a" {
		t.Fatalf("first %q redelivered=%v", d.Body, d.Redelivered)
	}
	if err := d.Nack(true); err != nil {
		t.Fatal(err)
	}
	d = recv(t, s)
	if !d.Redelivered || string(d.Body) != "a" {
		t.Fatalf("after requeue %q redelivered=%v, want a at the head, redelivered", d.Body, d.Redelivered)
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	if err := d.Ack(); err == nil || !strings.Contains(err.Error(), "unknown delivery tag") {
		t.Errorf("double ack = %v", err)
	}
	d = recv(t, s)
	if d.Redelivered || string(d.Body) != "b" {
		t.Errorf("second %q redelivered=%v", d.Body, d.Redelivered)
	}
	if err := (&driver.Delivery{}).Ack(); !errors.Is(err, driver.ErrNotSettleable) {
		t.Errorf("ack without acknowledger = %v", err)
	}
}

func TestDeadLetterOnReject(t *testing.T) {
	c := fresh(t)
	mustExchange(t, c, "dlx", driver.Direct)
	mustQueue(t, c, driver.Queue{Name: "q.dlq", Durable: true})
	mustBind(t, c, "dlx", "q.dlq", "q.dlq")
	mustQueue(t, c, driver.Queue{Name: "q", Args: driver.Table{"x-dead-letter-exchange": "dlx", "x-dead-letter-routing-key": "q.dlq"}, Durable: true})
	mustQueue(t, c, driver.Queue{Name: "keep", Args: driver.Table{"x-dead-letter-exchange": "dlx"}, Durable: true})
	mustBind(t, c, "dlx", "q.dlq", "keep") // original routing key is used without x-dead-letter-routing-key
	mustExchange(t, c, "app", driver.Direct)
	mustBind(t, c, "app", "q", "k")
	mustPublish(t, c, driver.Message{Exchange: "app", RoutingKey: "k", MessageID: "m1", Body: []byte("x"), Headers: driver.Table{"h": "v"}})

	d := mustGet(t, c, "q")
	if err := d.Nack(false); err != nil {
		t.Fatal(err)
	}
	dl := mustGet(t, c, "q.dlq")
	if dl.Exchange != "dlx" || dl.RoutingKey != "q.dlq" || dl.MessageID != "m1" || dl.Headers["h"] != "v" || dl.Redelivered {
		t.Errorf("dead letter %+v", dl)
	}
	deaths, _ := dl.Headers["x-death"].([]any)
	if len(deaths) != 1 {
		t.Fatalf("x-death = %#v", dl.Headers["x-death"])
	}
	x := deaths[0].(driver.Table)
	if x["count"] != int64(1) || x["reason"] != "rejected" || x["queue"] != "q" || x["exchange"] != "app" ||
		!equalValues(x["routing-keys"], []any{"k"}) {
		t.Errorf("x-death entry %#v", x)
	}
	if _, ok := x["time"].(time.Time); !ok {
		t.Errorf("x-death time %#v", x["time"])
	}
	if dl.Headers["x-first-death-queue"] != "q" || dl.Headers["x-first-death-reason"] != "rejected" || dl.Headers["x-first-death-exchange"] != "app" {
		t.Errorf("x-first-death headers %v", dl.Headers)
	}

	// Dead-letter it again through the same queue: the entry counts up.
	mustBind(t, c, "app", "q", "again")
	if err := c.Publish(ctx, driver.Message{Exchange: "app", RoutingKey: "again", Headers: dl.Headers}); err != nil {
		t.Fatal(err)
	}
	_ = dl.Ack()
	d = mustGet(t, c, "q")
	_ = d.Nack(false)
	dl = mustGet(t, c, "q.dlq")
	deaths = dl.Headers["x-death"].([]any)
	if len(deaths) != 1 || deaths[0].(driver.Table)["count"] != int64(2) {
		t.Errorf("second death %#v", deaths)
	}

	mustPublish(t, c, driver.Message{RoutingKey: "keep"})
	d = mustGet(t, c, "keep")
	_ = d.Nack(false)
	dl = mustGet(t, c, "q.dlq")
	if dl.RoutingKey != "keep" {
		t.Errorf("dead letter without routing key arg: routing key %q", dl.RoutingKey)
	}
}

func TestQueueTTLExpiresWithoutConsumer(t *testing.T) {
	c := fresh(t)
	// A retry rung: TTL and dead-lettering back to the source queue.
	mustExchange(t, c, "acemq.retry", driver.Direct)
	mustQueue(t, c, driver.Queue{Name: "orders", Durable: true})
	mustBind(t, c, "acemq.retry", "orders", "orders")
	mustQueue(t, c, driver.Queue{Name: "orders.retry.1s", Durable: true, Args: driver.Table{
		"x-message-ttl": int64(100), "x-dead-letter-exchange": "acemq.retry", "x-dead-letter-routing-key": "orders",
	}})
	start := time.Now()
	mustPublish(t, c, driver.Message{RoutingKey: "orders.retry.1s", Body: []byte("again")})
	testenv.Eventually(t, "the message to come back", func() bool { return messages(t, c, "orders") == 1 })
	if el := time.Since(start); el < 100*time.Millisecond {
		t.Errorf("came back after %v, before the TTL", el)
	}
	d := mustGet(t, c, "orders")
	x := d.Headers["x-death"].([]any)[0].(driver.Table)
	if x["reason"] != "expired" || x["queue"] != "orders.retry.1s" || d.RoutingKey != "orders" || d.Exchange != "acemq.retry" {
		t.Errorf("returned %+v / %#v", d, x)
	}
	if messages(t, c, "orders.retry.1s") != 0 {
		t.Error("rung not empty")
	}
}

func TestPerMessageExpiration(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "dead", Durable: true})
	mustQueue(t, c, driver.Queue{Name: "q", Args: driver.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"}, Durable: true})
	mustPublish(t, c, driver.Message{RoutingKey: "q", Expiration: "50", Body: []byte("short")})
	mustPublish(t, c, driver.Message{RoutingKey: "q", Body: []byte("forever")})
	testenv.Eventually(t, "expiry", func() bool { return messages(t, c, "dead") == 1 })
	d := mustGet(t, c, "dead")
	x := d.Headers["x-death"].([]any)[0].(driver.Table)
	if string(d.Body) != "short" || x["reason"] != "expired" || x["original-expiration"] != "50" {
		t.Errorf("expired %q %#v", d.Body, x)
	}
	if n := messages(t, c, "q"); n != 1 {
		t.Errorf("q holds %d, want the message without expiration", n)
	}

	// Expiry is from the head: a short-lived message behind a long-lived one
	// waits until it reaches the head.
	mustQueue(t, c, driver.Queue{Name: "h", Args: driver.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"}, Durable: true})
	mustPublish(t, c, driver.Message{RoutingKey: "h", Body: []byte("first")})
	mustPublish(t, c, driver.Message{RoutingKey: "h", Expiration: "1", Body: []byte("second")})
	time.Sleep(20 * time.Millisecond)
	if n := messages(t, c, "h"); n != 2 {
		t.Errorf("h holds %d, want 2", n)
	}
	first := mustGet(t, c, "h")
	_ = first.Ack()
	if _, ok, _ := c.Get(ctx, "h"); ok {
		t.Error("expired message handed out")
	}
	if n := messages(t, c, "dead"); n != 1 {
		t.Errorf("dead holds %d, want 1", n)
	}

	// Expiration "0" reaches a waiting consumer, and expires otherwise.
	mustQueue(t, c, driver.Queue{Name: "z", Durable: true})
	mustPublish(t, c, driver.Message{RoutingKey: "z", Expiration: "0"})
	if n := messages(t, c, "z"); n != 0 {
		t.Errorf("zero-TTL message with no consumer kept: %d", n)
	}
	s := mustConsume(t, c, driver.ConsumeSpec{Queue: "z"})
	mustPublish(t, c, driver.Message{RoutingKey: "z", Expiration: "0", Body: []byte("now")})
	if d := recv(t, s); string(d.Body) != "now" {
		t.Errorf("zero-TTL delivery %q", d.Body)
	}
}

func TestShorterOfQueueAndMessageTTL(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "q", Args: driver.Table{"x-message-ttl": int32(60000)}, Durable: true})
	mustPublish(t, c, driver.Message{RoutingKey: "q", Expiration: "10"})
	testenv.Eventually(t, "expiry", func() bool { return messages(t, c, "q") == 0 })
}

func TestDeadLetterCycleIsDropped(t *testing.T) {
	c := fresh(t)
	// Expired messages that would come straight back to their own queue are
	// dropped, as RabbitMQ does.
	mustQueue(t, c, driver.Queue{Name: "loop", Args: driver.Table{"x-message-ttl": int32(10), "x-dead-letter-exchange": ""}, Durable: true})
	mustPublish(t, c, driver.Message{RoutingKey: "loop"})
	testenv.Eventually(t, "the cycle to be broken", func() bool { return messages(t, c, "loop") == 0 })
	time.Sleep(30 * time.Millisecond)
	if n := messages(t, c, "loop"); n != 0 {
		t.Errorf("loop holds %d", n)
	}
}

func TestGet(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	if _, ok, err := c.Get(ctx, "q"); ok || err != nil {
		t.Fatalf("get empty = %v, %v", ok, err)
	}
	if _, _, err := c.Get(ctx, "missing"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("get missing = %v", err)
	}
	mustPublish(t, c, driver.Message{RoutingKey: "q", Body: []byte("a")})
	d := mustGet(t, c, "q")
	if n := messages(t, c, "q"); n != 0 {
		t.Errorf("unacked message counted as ready: %d", n)
	}
	if err := d.Nack(true); err != nil {
		t.Fatal(err)
	}
	d = mustGet(t, c, "q")
	if !d.Redelivered {
		t.Error("requeued get not redelivered")
	}
	if err := d.Ack(); err != nil {
		t.Fatal(err)
	}
	if err := d.Nack(false); err == nil {
		t.Error("settling twice succeeded")
	}
	// Unsettled gets go back when the connection closes.
	url := newURL(t)
	c1 := dial(t, url)
	mustQueue(t, c1, driver.Queue{Name: "g", Durable: true})
	mustPublish(t, c1, driver.Message{RoutingKey: "g"})
	d = mustGet(t, c1, "g")
	_ = c1.Close()
	if err := d.Ack(); !errors.Is(err, driver.ErrChannelClosed) {
		t.Errorf("ack after close = %v", err)
	}
	c2 := dial(t, url)
	if d := mustGet(t, c2, "g"); !d.Redelivered {
		t.Error("not redelivered after close")
	}
}

func TestExclusiveQueue(t *testing.T) {
	url := newURL(t)
	owner := dial(t, url)
	other := dial(t, url)
	mustQueue(t, owner, driver.Queue{Name: "ex", Exclusive: true, AutoDelete: true})
	mustQueue(t, owner, driver.Queue{Name: "ex", Exclusive: true, AutoDelete: true})
	var ae *driver.AccessError
	check := func(what string, err error) {
		t.Helper()
		if !errors.As(err, &ae) || ae.Code != 405 || !strings.Contains(ae.Text, "RESOURCE_LOCKED") {
			t.Errorf("%s from another connection = %v, want 405 RESOURCE_LOCKED", what, err)
		}
	}
	_, err := other.DeclareQueue(ctx, driver.Queue{Name: "ex", Exclusive: true, AutoDelete: true})
	check("declare", err)
	_, err = other.InspectQueue(ctx, "ex")
	check("inspect", err)
	_, err = other.Consume(ctx, driver.ConsumeSpec{Queue: "ex"})
	check("consume", err)
	_, _, err = other.Get(ctx, "ex")
	check("get", err)
	_, err = other.DeleteQueue(ctx, "ex")
	check("delete", err)
	// Anyone may publish to it.
	mustPublish(t, other, driver.Message{RoutingKey: "ex", Mandatory: true})
	if n := messages(t, owner, "ex"); n != 1 {
		t.Errorf("exclusive queue holds %d", n)
	}
	_ = owner.Close()
	if _, err := other.InspectQueue(ctx, "ex"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("exclusive queue outlived its connection: %v", err)
	}
}

func TestAutoDeleteQueue(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "ad", AutoDelete: true, Durable: true})
	mustExchange(t, c, "x", driver.Fanout)
	mustBind(t, c, "x", "ad", "")
	// Not deleted before it has had a consumer.
	mustPublish(t, c, driver.Message{Exchange: "x"})
	s1 := mustConsume(t, c, driver.ConsumeSpec{Queue: "ad"})
	s2 := mustConsume(t, c, driver.ConsumeSpec{Queue: "ad"})
	if err := s1.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InspectQueue(ctx, "ad"); err != nil {
		t.Fatalf("deleted while a consumer remains: %v", err)
	}
	if err := s2.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := c.InspectQueue(ctx, "ad"); !errors.Is(err, driver.ErrNotFound) {
		t.Fatalf("auto-delete queue survived its last consumer: %v", err)
	}
	if err := c.Publish(ctx, driver.Message{Exchange: "x", Mandatory: true}); err == nil {
		t.Error("binding survived the queue")
	}
}

func TestDeleteQueue(t *testing.T) {
	c := fresh(t)
	if n, err := c.DeleteQueue(ctx, "missing"); n != 0 || err != nil {
		t.Errorf("delete missing = %d, %v", n, err)
	}
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	mustExchange(t, c, "x", driver.Direct)
	mustBind(t, c, "x", "q", "k")
	mustPublish(t, c, driver.Message{Exchange: "x", RoutingKey: "k"})
	mustPublish(t, c, driver.Message{Exchange: "x", RoutingKey: "k"})
	s := mustConsume(t, c, driver.ConsumeSpec{Queue: "q", Prefetch: 1})
	d := recv(t, s)
	n, err := c.DeleteQueue(ctx, "q")
	if n != 1 || err != nil {
		t.Errorf("delete = %d, %v, want 1 ready message", n, err)
	}
	waitClosed(t, s) // the broker cancels consumers of a deleted queue
	if err := d.Ack(); err != nil {
		t.Errorf("ack after queue deletion = %v", err)
	}
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	var re *driver.ReturnError
	if err := c.Publish(ctx, driver.Message{Exchange: "x", RoutingKey: "k", Mandatory: true}); !errors.As(err, &re) {
		t.Errorf("binding survived queue deletion: %v", err)
	}
}

func TestAutoDeleteExchange(t *testing.T) {
	c := fresh(t)
	if err := c.DeclareExchange(ctx, driver.Exchange{Name: "ax", Kind: driver.Direct, AutoDelete: true}); err != nil {
		t.Fatal(err)
	}
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	mustBind(t, c, "ax", "q", "k")
	if err := c.Unbind(ctx, driver.Binding{Exchange: "ax", Queue: "q", RoutingKey: "k"}); err != nil {
		t.Fatal(err)
	}
	if err := c.InspectExchange(ctx, "ax"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("auto-delete exchange survived its last binding: %v", err)
	}
}

func TestCancelSemantics(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	for range 3 {
		mustPublish(t, c, driver.Message{RoutingKey: "q"})
	}
	s := mustConsume(t, c, driver.ConsumeSpec{Queue: "q", Prefetch: 2})
	d1 := recv(t, s)
	if err := s.Cancel(ctx); err != nil {
		t.Fatal(err)
	}
	if err := s.Cancel(ctx); err != nil {
		t.Errorf("second cancel = %v", err)
	}
	// The second delivery was already assigned: it is handed up, then the
	// channel closes.
	d2 := recv(t, s)
	waitClosed(t, s)
	if err := d1.Ack(); err != nil {
		t.Errorf("ack after cancel = %v", err)
	}
	if err := d2.Nack(true); err != nil {
		t.Errorf("nack after cancel = %v", err)
	}
	if n := messages(t, c, "q"); n != 2 {
		t.Errorf("ready = %d, want 2", n)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := d2.Ack(); !errors.Is(err, driver.ErrChannelClosed) {
		t.Errorf("ack after close = %v", err)
	}
}

func TestCloseRequeuesUnsettled(t *testing.T) {
	url := newURL(t)
	c := dial(t, url)
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	for i := range 3 {
		mustPublish(t, c, driver.Message{RoutingKey: "q", Body: fmt.Appendf(nil, "%d", i)})
	}
	s := mustConsume(t, c, driver.ConsumeSpec{Queue: "q", Prefetch: 2})
	d := recv(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, ok := <-s.Deliveries(); ok {
		t.Error("delivery after Close")
	}
	if err := d.Ack(); !errors.Is(err, driver.ErrChannelClosed) {
		t.Errorf("ack after close = %v", err)
	}
	var bodies []string
	for range 3 {
		d := mustGet(t, c, "q")
		bodies = append(bodies, fmt.Sprintf("%s:%v", d.Body, d.Redelivered))
		_ = d.Ack()
	}
	if !slices.Equal(bodies, []string{"0:true", "1:true", "2:false"}) {
		t.Errorf("after close: %v (want original order, unsettled marked redelivered)", bodies)
	}

	// Conn.Close does the same for every subscription.
	c2 := dial(t, url)
	mustPublish(t, c, driver.Message{RoutingKey: "q"})
	s2 := mustConsume(t, c2, driver.ConsumeSpec{Queue: "q"})
	d = recv(t, s2)
	if err := c2.Close(); err != nil {
		t.Fatal(err)
	}
	waitClosed(t, s2)
	if err := d.Ack(); !errors.Is(err, driver.ErrChannelClosed) {
		t.Errorf("ack after conn close = %v", err)
	}
	if d := mustGet(t, c, "q"); !d.Redelivered {
		t.Error("not redelivered after conn close")
	}
}

func TestClosedConn(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Errorf("second close = %v", err)
	}
	checks := map[string]error{
		"publish": c.Publish(ctx, driver.Message{RoutingKey: "q"}),
		"declare": c.DeclareExchange(ctx, driver.Exchange{Name: "x", Kind: driver.Direct}),
		"ping":    c.Ping(ctx),
	}
	_, checks["declare queue"] = c.DeclareQueue(ctx, driver.Queue{Name: "q", Durable: true})
	_, checks["consume"] = c.Consume(ctx, driver.ConsumeSpec{Queue: "q"})
	_, _, checks["get"] = c.Get(ctx, "q")
	for op, err := range checks {
		if !errors.Is(err, driver.ErrClosed) {
			t.Errorf("%s on closed conn = %v, want ErrClosed", op, err)
		}
	}
	if errs := c.PublishBatch(ctx, []driver.Message{{RoutingKey: "q"}}); !errors.Is(errs[0], driver.ErrClosed) {
		t.Errorf("batch on closed conn = %v", errs)
	}
}

func TestCapabilitiesAndPing(t *testing.T) {
	c := fresh(t)
	want := driver.Capabilities{PublisherConfirms: true, DeadLettering: true, QuorumQueues: true, Streams: true}
	if got := c.Capabilities(); got != want {
		t.Errorf("capabilities %+v", got)
	}
	if b, r := c.Blocked(); b || r != "" {
		t.Error("blocked")
	}
	if err := c.Ping(ctx); err != nil {
		t.Error(err)
	}
	cctx, cancel := context.WithCancel(ctx)
	cancel()
	if err := c.Ping(cctx); !errors.Is(err, context.Canceled) {
		t.Errorf("ping with cancelled ctx = %v", err)
	}
}

func TestExclusiveConsumer(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	mustConsume(t, c, driver.ConsumeSpec{Queue: "q", Exclusive: true})
	var ae *driver.AccessError
	if _, err := c.Consume(ctx, driver.ConsumeSpec{Queue: "q"}); !errors.As(err, &ae) || ae.Code != 403 {
		t.Errorf("second consumer of exclusive consumer's queue = %v", err)
	}
}

func TestConcurrentPublishConsume(t *testing.T) {
	url := newURL(t)
	pub := dial(t, url)
	con := dial(t, url)
	mustQueue(t, pub, driver.Queue{Name: "q", Durable: true})
	s := mustConsume(t, con, driver.ConsumeSpec{Queue: "q", Prefetch: 10})
	const workers, per = 16, 50
	var wg sync.WaitGroup
	for w := range workers {
		wg.Go(func() {
			for i := range per {
				if err := pub.Publish(ctx, driver.Message{RoutingKey: "q", Body: fmt.Appendf(nil, "%d-%d", w, i)}); err != nil {
					t.Error(err)
				}
			}
		})
	}
	seen := map[string]bool{}
	for len(seen) < workers*per {
		d := recv(t, s)
		seen[string(d.Body)] = true
		if err := d.Ack(); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
}

func TestExpiryWithNoConnectionOpen(t *testing.T) {
	url := newURL(t)
	c := dial(t, url)
	mustQueue(t, c, driver.Queue{Name: "dead", Durable: true})
	mustQueue(t, c, driver.Queue{Name: "rung", Durable: true, Args: driver.Table{
		"x-message-ttl": uint16(30), "x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead",
	}})
	mustPublish(t, c, driver.Message{RoutingKey: "rung", Body: []byte("b")})
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	time.Sleep(60 * time.Millisecond)
	c2 := dial(t, url)
	testenv.Eventually(t, "expiry while no connection was open", func() bool { return messages(t, c2, "dead") == 1 })
}

func TestGetRejectDeadLetters(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "dead", Durable: true})
	mustQueue(t, c, driver.Queue{Name: "q", Args: driver.Table{"x-dead-letter-exchange": "", "x-dead-letter-routing-key": "dead"}, Durable: true})
	mustPublish(t, c, driver.Message{RoutingKey: "q", Expiration: "60000"})
	d := mustGet(t, c, "q")
	if err := d.Nack(false); err != nil {
		t.Fatal(err)
	}
	dl := mustGet(t, c, "dead")
	h := dl.Headers
	if h["x-last-death-reason"] != "rejected" || h["x-last-death-queue"] != "q" || h["x-last-death-exchange"] != "" {
		t.Errorf("x-last-death headers %v", h)
	}
	x := h["x-death"].([]any)[0].(driver.Table)
	if x["original-expiration"] != "60000" {
		t.Errorf("x-death %v: want original-expiration", x)
	}
	// A dead-lettered message loses its per-message expiration.
	if err := dl.Nack(true); err != nil {
		t.Fatal(err)
	}
	if n := messages(t, c, "dead"); n != 1 {
		t.Errorf("dead holds %d", n)
	}
}

func TestServerCancelOnQueueDeleteHandsUpAssigned(t *testing.T) {
	c := fresh(t)
	mustQueue(t, c, driver.Queue{Name: "q", Durable: true})
	mustPublish(t, c, driver.Message{RoutingKey: "q", Body: []byte("a")})
	mustPublish(t, c, driver.Message{RoutingKey: "q", Body: []byte("b")})
	s := mustConsume(t, c, driver.ConsumeSpec{Queue: "q"})
	if _, err := c.DeleteQueue(ctx, "q"); err != nil {
		t.Fatal(err)
	}
	var got []string
	for d := range s.Deliveries() {
		got = append(got, string(d.Body))
		if err := d.Nack(true); err != nil { // requeue to a deleted queue: dropped
			t.Errorf("nack after queue deletion: %v", err)
		}
	}
	if !slices.Equal(got, []string{"a", "b"}) {
		t.Errorf("handed up %v", got)
	}
}

// TestChurn publishes, consumes, settles and closes from many goroutines at
// once; it exists for the race detector and goleak.
func TestChurn(t *testing.T) {
	url := newURL(t)
	admin := dial(t, url)
	mustExchange(t, admin, "dlx", driver.Fanout)
	mustQueue(t, admin, driver.Queue{Name: "dlq", Durable: true})
	mustBind(t, admin, "dlx", "dlq", "")
	mustQueue(t, admin, driver.Queue{Name: "work", Args: driver.Table{"x-dead-letter-exchange": "dlx", "x-message-ttl": int32(20)}, Durable: true})
	var wg sync.WaitGroup
	stop := make(chan struct{})
	for p := range 4 {
		wg.Go(func() {
			c, err := Driver{}.Open(ctx, driver.Config{URLs: []string{url}})
			if err != nil {
				t.Error(err)
				return
			}
			defer c.Close()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				_ = c.Publish(ctx, driver.Message{RoutingKey: "work", Body: fmt.Appendf(nil, "%d-%d", p, i)})
			}
		})
	}
	for w := range 6 {
		wg.Go(func() {
			for round := 0; ; round++ {
				select {
				case <-stop:
					return
				default:
				}
				c, err := Driver{}.Open(ctx, driver.Config{URLs: []string{url}})
				if err != nil {
					t.Error(err)
					return
				}
				s, err := c.Consume(ctx, driver.ConsumeSpec{Queue: "work", Prefetch: w % 3})
				if err != nil {
					t.Error(err)
					_ = c.Close()
					return
				}
				var held []driver.Delivery
			take:
				for i := 0; i < 20; i++ {
					select {
					case d, ok := <-s.Deliveries():
						if !ok {
							break take
						}
						switch i % 4 {
						case 0:
							_ = d.Ack()
						case 1:
							_ = d.Nack(true)
						case 2:
							_ = d.Nack(false)
						default:
							held = append(held, d)
						}
					case <-time.After(10 * time.Millisecond):
					}
				}
				switch round % 3 {
				case 0:
					_ = s.Cancel(ctx)
					_ = s.Close()
				case 1:
					_ = s.Close()
				}
				_ = c.Close()
				for _, d := range held {
					if err := d.Ack(); !errors.Is(err, driver.ErrChannelClosed) {
						t.Errorf("ack after close = %v", err)
					}
				}
			}
		})
	}
	time.Sleep(300 * time.Millisecond)
	close(stop)
	wg.Wait()
}
