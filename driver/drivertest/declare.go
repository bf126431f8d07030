package drivertest

import (
	"errors"
	"slices"
	"strings"

	"github.com/acemq/acemq/driver"
)

// The declaration rules: redeclaring, conflicting settings, reserved
// names, quorum queues, exclusive and auto-delete queues.

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
	// The connection is still usable after a refused declaration, and the
	// exchange is unchanged.
	if err := e.admin.DeclareExchange(e.ctx, driver.Exchange{Name: name, Kind: driver.Direct, Durable: true}); err != nil {
		t.Fatalf("redeclaring exchange %q after a refused declaration: %v", name, err)
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
	// The connection is still usable after a refused declaration.
	if _, err := e.admin.DeclareQueue(e.ctx, driver.Queue{Name: name, Durable: true, Args: args}); err != nil {
		t.Fatalf("redeclaring queue %q after a refused declaration: %v", name, err)
	}
	// A server-named queue can be published to by its name.
	named := e.queue(e.admin, driver.Queue{Exclusive: true, AutoDelete: true})
	e.publish(e.admin, driver.Message{RoutingKey: named.Name, Mandatory: true, MessageID: e.id(), Body: []byte("named")})
	if got := e.takeAll(e.admin, named.Name, 1); !slices.Equal(got, []string{"named"}) {
		t.Errorf("server-named queue %q got %v", named.Name, got)
	}
}

func testQuorumRules(e *env) {
	if !e.caps.QuorumQueues {
		e.t.Log("not run: the driver does not report quorum queues")
		return
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
	e.eventually("the exclusive queue to go with its connection", func() bool { return e.queueGone(other, q) })
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
	// While a consumer remains the queue is there: a mandatory publish
	// routes to it and the remaining consumer gets it.
	if ins, ok := e.admin.(driver.Inspector); ok {
		if _, err := ins.InspectQueue(e.ctx, q); err != nil {
			t.Fatalf("auto-delete queue gone while a consumer remains: %v", err)
		}
	}
	if err := e.admin.Publish(e.ctx, driver.Message{RoutingKey: q, Mandatory: true, MessageID: e.id(), Body: []byte("still here")}); err != nil {
		t.Fatalf("publish to the auto-delete queue while a consumer remains: %v", err)
	}
	d := e.recv(s2)
	if string(d.Body) != "still here" {
		t.Errorf("the remaining consumer got %q", d.Body)
	}
	if err := d.Ack(); err != nil {
		t.Fatalf("ack: %v", err)
	}
	if err := s2.Cancel(e.ctx); err != nil {
		t.Fatalf("cancel: %v", err)
	}
	e.eventually("the auto-delete queue to go with its last consumer", func() bool { return e.queueGone(e.admin, q) })
}
