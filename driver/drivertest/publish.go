package drivertest

import (
	"fmt"
	"slices"
	"sync"
	"time"

	"github.com/acemq/acemq/driver"
)

// Message properties and header types, and publisher confirms.

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
		e.t.Log("not run: the driver does not report publisher confirms")
		return
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
		e.t.Log("not run: the driver does not report publisher confirms")
		return
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
