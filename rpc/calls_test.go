package rpc

import (
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/wire"
)

// reply is a reply naming corr in its x-acemq-correlation header.
func reply(corr string) acemq.Message[[]byte] {
	env := acemq.ReadEnvelope(map[string]any{wire.HeaderCorrelation: corr}, "reply", "")
	return acemq.Message[[]byte]{Envelope: env, ContentType: "application/json", Body: []byte(`"` + corr + `"`)}
}

// signalled reports whether c's done has a signal waiting, without taking it.
func signalled(c *call) bool { return len(c.done) > 0 }

// A call is reused once its Ask is done with it, and a reply to the call
// it was before (late, after a timeout) is counted unmatched: it never
// reaches the call in its next use, whose own reply still does.
func TestLateReplyMissesReusedCall(t *testing.T) {
	r := &Requester[string, string]{codec: acemq.JSON, calls: map[string]*call{}}
	first, err := r.register("u1")
	if err != nil {
		t.Fatal(err)
	}
	// u1 times out: its Ask gives it up and is done with it.
	if !r.forget("u1") {
		t.Fatal("the outstanding call u1 could not be given up")
	}
	r.release(first)

	second, err := r.register("u2")
	if err != nil {
		t.Fatal(err)
	}
	if second != first {
		t.Fatal("the call given up was not reused: this test checks nothing")
	}
	r.onReply(t.Context(), reply("u1"))
	if r.Unmatched() != 1 || signalled(second) {
		t.Fatalf("the late reply to u1: Unmatched() = %d, reached the reused call: %v", r.Unmatched(), signalled(second))
	}
	if r.Outstanding() != 1 {
		t.Fatalf("Outstanding() = %d, want u2", r.Outstanding())
	}

	r.onReply(t.Context(), reply("u2"))
	if !signalled(second) {
		t.Fatal("u2's reply did not reach its call")
	}
	<-second.done
	if got, err := r.read("u2", &second.res.msg); err != nil || got != "u2" {
		t.Fatalf("u2 read %q, %v", got, err)
	}
	r.release(second)
	if second.res.msg.Body != nil {
		t.Fatal("a released call keeps its reply's body")
	}

	// A call taken by Close is reused the same way, and once closed the
	// requester hands out no call.
	third, _ := r.register("u3")
	r.shutdown("closed by the test")
	<-third.done
	if third.res.closed == "" {
		t.Fatal("Close did not fail u3")
	}
	r.release(third)
	if _, err := r.register("u4"); err == nil {
		t.Fatal("register after Close succeeded")
	}
	r.onReply(t.Context(), reply("u3"))
	if r.Unmatched() != 2 || signalled(third) {
		t.Fatalf("a reply after Close: Unmatched() = %d, reached the call: %v", r.Unmatched(), signalled(third))
	}
}

// The free list keeps at most maxFreeCalls calls.
func TestFreeCallsBounded(t *testing.T) {
	r := &Requester[string, string]{codec: acemq.JSON, calls: map[string]*call{}}
	for range maxFreeCalls + 10 {
		r.release(&call{done: make(chan struct{}, 1)})
	}
	if len(r.free) != maxFreeCalls {
		t.Fatalf("%d free calls kept, want %d", len(r.free), maxFreeCalls)
	}
}
