package rabbitmq

import (
	"testing"

	amqp "github.com/rabbitmq/amqp091-go"
)

// TestReturnsFindTheirPublish: a basic.return is recorded on the oldest
// outstanding mandatory publish with its message-id and destination that
// has none yet, whatever the order the returns arrive in, with duplicate
// ids, and after publishes in the middle of the list completed.
func TestReturnsFindTheirPublish(t *testing.T) {
	pc := &pubChan{rets: make(chan amqp.Return, 16)}
	pub := func(id, ex, rk string) *pending {
		p := &pending{pc: pc, mandatory: true, msgID: id, exchange: ex, routingKey: rk}
		pc.link(p)
		return p
	}
	ret := func(id, ex, rk string) {
		pc.rets <- amqp.Return{MessageId: id, Exchange: ex, RoutingKey: rk, ReplyCode: 312, ReplyText: "NO_ROUTE"}
	}
	a := pub("a", "x", "k")
	b1 := pub("b", "x", "k")  // a republish under the same id ...
	b2 := pub("b", "y", "k2") // ... to another destination
	b3 := pub("b", "x", "k")  // and the same id and destination again
	c := pub("c", "", "q")
	d := pub("d", "x", "k")

	// c completes unreturned: it leaves the middle of the list.
	pc.unlink(c)
	// Returns out of publish order: d's, then b's to y, then two of b's
	// to x, then one for a publish not outstanding, and one without an id.
	ret("d", "x", "k")
	ret("b", "y", "k2")
	ret("b", "x", "k")
	ret("b", "x", "k")
	ret("c", "", "q")
	ret("", "x", "k")
	pc.drainReturns()

	for _, tc := range []struct {
		name     string
		p        *pending
		returned bool
	}{{"a", a, false}, {"b to x", b1, true}, {"b to y", b2, true}, {"b to x again", b3, true}, {"c", c, false}, {"d", d, true}} {
		if got := tc.p.ret != nil; got != tc.returned {
			t.Errorf("%s: returned %v, want %v", tc.name, got, tc.returned)
			continue
		}
		if tc.p.ret != nil && (tc.p.ret.Exchange != tc.p.exchange || tc.p.ret.RoutingKey != tc.p.routingKey || tc.p.ret.Code != 312) {
			t.Errorf("%s: return %+v", tc.name, tc.p.ret)
		}
	}

	// The oldest completes; the rest are still found. A duplicate
	// returned once marks the oldest publish only.
	pc.unlink(a)
	e1 := pub("e", "x", "k")
	e2 := pub("e", "x", "k")
	ret("e", "x", "k")
	pc.drainReturns()
	if e1.ret == nil || e2.ret != nil {
		t.Errorf("one return of two publishes with the same id and destination: oldest %v, newest %v", e1.ret, e2.ret)
	}

	// The newest completes and another is published: the older ones are
	// still found.
	g := pub("g", "x", "k")
	h := pub("h", "x", "k")
	pc.unlink(h)
	i := pub("i", "x", "k")
	ret("g", "x", "k")
	ret("i", "x", "k")
	pc.drainReturns()
	if g.ret == nil || i.ret == nil {
		t.Errorf("returns after the newest publish left: older %v, newer %v", g.ret, i.ret)
	}

	// Unlinking every publish, ends and middle, empties the list.
	for _, p := range []*pending{d, b2, e2, i, b1, e1, g, b3} {
		pc.unlink(p)
	}
	if pc.oldest != nil || pc.newest != nil {
		t.Errorf("the list is not empty after every publish left: oldest %p, newest %p", pc.oldest, pc.newest)
	}
	// A publish linked afterwards is found.
	f := pub("f", "x", "k")
	ret("f", "x", "k")
	pc.drainReturns()
	if f.ret == nil {
		t.Error("a return for a publish linked after the list emptied was not recorded")
	}
}
