package rpc

import (
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/wire"
)

// FuzzReply feeds arbitrary replies (the headers, properties and body a
// foreign responder could send) through the requester's matching and
// decoding: nothing panics, a reply settles at most one call, and a reply
// that settles none is counted unmatched.
func FuzzReply(f *testing.F) {
	f.Add("u1", "", "", "", "application/json", []byte(`{"a":1}`), "")
	f.Add("", "u2", "", "", "", []byte(`null`), "")
	f.Add("", "", "u3", "", "text/plain", []byte("x"), "errorString: nope")
	f.Add("u1", "u2", "u3", "u1", "application/json", []byte(`{`), "")
	f.Add("zz", "zz", "zz", "zz", "application/xml", []byte{0xff}, "")
	f.Fuzz(func(t *testing.T, corr, prop, causation, id, ct string, body []byte, errText string) {
		r := &Requester[map[string]any, map[string]any]{codec: acemq.JSON, calls: map[string]*call{}}
		for _, k := range []string{"u1", "u2", "u3"} {
			r.calls[k] = &call{done: make(chan struct{}, 1)}
		}
		h := map[string]any{}
		if corr != "" {
			h[wire.HeaderCorrelation] = corr
		}
		if causation != "" {
			h[wire.HeaderCausation] = []byte(causation)
		}
		if id != "" {
			h[wire.HeaderID] = id
		}
		if errText != "" {
			h[HeaderError] = errText
		}
		m := acemq.Message[[]byte]{
			Envelope:      acemq.ReadEnvelope(h, "reply", ""),
			ContentType:   ct,
			CorrelationID: prop,
			Body:          body,
		}
		if ack := r.onReply(t.Context(), m); ack.Decision() != acemq.DecisionAccept {
			t.Fatalf("a reply was settled %s; every reply is accepted", ack.Decision())
		}
		settled := 0
		for _, c := range []string{"u1", "u2", "u3"} {
			if _, waiting := r.calls[c]; !waiting {
				settled++
			}
		}
		if settled > 1 {
			t.Fatalf("one reply settled %d calls", settled)
		}
		if (settled == 0) != (r.Unmatched() == 1) {
			t.Fatalf("settled %d calls, Unmatched %d", settled, r.Unmatched())
		}
		if _, err := r.read("u1", &m); errText != "" {
			if _, ok := err.(*ResponderError); !ok {
				t.Fatalf("a reply carrying acemq-error read as %v", err)
			}
		}
		_ = ReplyAddress(acemq.Message[int]{Envelope: acemq.ReadEnvelope(map[string]any{HeaderReplyTo: body}, "", ""), ReplyTo: prop})
	})
}
