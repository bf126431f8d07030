package rpc_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/rpc"
)

// settlements records every settlement on a connection.
type settlements struct {
	mu  sync.Mutex
	all []acemq.Settlement
}

func recordSettlements(t *testing.T, c *acemq.Conn) *settlements {
	s := &settlements{}
	t.Cleanup(c.OnSettle(func(x acemq.Settlement) {
		s.mu.Lock()
		s.all = append(s.all, x)
		s.mu.Unlock()
	}))
	return s
}

func (s *settlements) wait(t *testing.T, n int) []acemq.Settlement {
	t.Helper()
	var out []acemq.Settlement
	testenv.Eventually(t, "settlements", func() bool {
		s.mu.Lock()
		defer s.mu.Unlock()
		out = append([]acemq.Settlement(nil), s.all...)
		return len(out) >= n
	})
	return out
}

// 5. Serve: concurrency, prefetch and tag pass through; the handle reports
// Queue, Running and InFlight, reaches the consumer, and closes like one.
func TestServeHandle(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("slow")
		release := make(chan struct{})
		responder := serve(t, conn, q, func(ctx context.Context, m acemq.Message[priceRequest]) (quote, error) {
			<-release
			return quote{Pence: 1}, nil
		}, acemq.WithConcurrency(3), acemq.WithPrefetch(5), acemq.WithConsumerTag("rpc-test-tag"))
		if responder.Queue() != q || !responder.Running() || responder.Consumer().Tag() != "rpc-test-tag" {
			t.Fatalf("Queue %q Running %t Tag %q", responder.Queue(), responder.Running(), responder.Consumer().Tag())
		}
		r := open[priceRequest, quote](t, conn, "", q)
		var wg sync.WaitGroup
		for range 4 {
			wg.Go(func() {
				if _, err := r.Ask(bg, priceRequest{SKU: "A"}); err != nil {
					t.Error(err)
				}
			})
		}
		testenv.Eventually(t, "three requests in flight", func() bool { return responder.InFlight() == 3 })
		close(release)
		wg.Wait()
		if responder.Answered() != 4 {
			t.Fatalf("Answered() = %d", responder.Answered())
		}
		select {
		case <-rpc.ReplyBoundDone(responder):
			t.Fatal("the replies' deadline ended before Close")
		default:
		}
		if err := responder.Close(bg); err != nil {
			t.Fatal(err)
		}
		select {
		case <-responder.Done():
		default:
			t.Fatal("Done is not closed after Close")
		}
		// Close ends the context (and the timer) the replies of the last
		// seconds share.
		select {
		case <-rpc.ReplyBoundDone(responder):
		default:
			t.Fatal("the replies' deadline lives on after Close")
		}
		if responder.Running() {
			t.Fatal("Running after Close")
		}
	})
}

// 5. The codec passes through and encodes the replies; NoDeclare passes
// through too.
func TestServeCodecAndDeclare(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("text")
		serve(t, conn, q, func(_ context.Context, m acemq.Message[string]) (string, error) {
			return strings.ToUpper(m.Payload), nil
		}, acemq.WithCodec(acemq.Text), acemq.WithDeclarations(false))
		r := open[string, string](t, conn, "", q, rpc.WithCodec(acemq.Text), rpc.WithTimeout(time.Hour))
		// The text codec reads only text/*: a JSON reply would fail here.
		if got, err := r.Ask(bg, "shout"); err != nil || got != "SHOUT" {
			t.Fatalf("Ask = %q, %v", got, err)
		}
		if _, err := brokertest.Driver(e.admin).InspectQueue(bg, contract.DeadLetterQueue(q)); !isNotFound(err) {
			t.Fatalf("NoDeclare did not pass through: %s exists (%v)", contract.DeadLetterQueue(q), err)
		}
		q2 := e.queue("declared")
		serve(t, conn, q2, price)
		if _, err := brokertest.Driver(e.admin).InspectQueue(bg, contract.DeadLetterQueue(q2)); err != nil {
			t.Fatalf("an ordinary responder did not declare its dead-letter half: %v", err)
		}
	})
}

// 6. The reply: default exchange, the address from the header first; a
// fresh envelope with the request's correlation, causation = the request's
// id, this connection's origin; correlation-id = the request's property,
// else its correlation; the request acked.
func TestReplyOnTheWire(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect(acemq.WithOrigin("pricing@test"))
		settled := recordSettlements(t, conn)
		q := e.queue("prices")
		serve(t, conn, q, price)
		viaHeader, viaProperty := e.queue("reply-a"), e.queue("reply-b")
		client := e.connect()

		req := acemq.MustEnvelope(acemq.Fields{ID: "req-1", CorrelationID: "conversation-9", Headers: map[string]any{rpc.HeaderReplyTo: viaHeader}})
		body, _ := json.Marshal(priceRequest{SKU: "ABC"})
		if err := brokertest.Publish(bg, client, brokertest.Outbound{RoutingKey: q, Envelope: req, Body: body, ContentType: "application/json", ReplyTo: viaProperty, CorrelationID: "amqp-corr-1"}); err != nil {
			t.Fatal(err)
		}
		d := e.get(viaHeader)
		if d.Exchange != "" || d.RoutingKey != viaHeader {
			t.Fatalf("the reply came through exchange %q with key %q; want the default exchange and %q", d.Exchange, d.RoutingKey, viaHeader)
		}
		h := d.Headers
		id := str(h[wire.HeaderID])
		switch {
		case id == "" || id == "req-1" || d.MessageID != id:
			t.Fatalf("reply id %q, message-id %q: want a fresh id on both", id, d.MessageID)
		case str(h[wire.HeaderCorrelation]) != "conversation-9":
			t.Fatalf("reply correlation %v, want the request's", h[wire.HeaderCorrelation])
		case str(h[wire.HeaderCausation]) != "req-1":
			t.Fatalf("reply causation %v, want the request's id", h[wire.HeaderCausation])
		case str(h[wire.HeaderOrigin]) != "pricing@test":
			t.Fatalf("reply origin %v", h[wire.HeaderOrigin])
		case d.CorrelationID != "amqp-corr-1":
			t.Fatalf("reply correlation-id %q, want the request's property", d.CorrelationID)
		case h[rpc.HeaderError] != nil:
			t.Fatalf("a success reply carries acemq-error %v", h[rpc.HeaderError])
		case d.ContentType != "application/json" || string(d.Body) != `{"pence":300}`:
			t.Fatalf("reply %s %q", d.ContentType, d.Body)
		}
		if n := e.depth(viaProperty); n != 0 {
			t.Fatal("the reply went to the property's address although the header named another")
		}
		if s := settled.wait(t, 1)[0]; s.Outcome != acemq.OutcomeAcked {
			t.Fatalf("the request was settled %s", s.Outcome)
		}

		// Without a correlation-id property, the reply's property is the
		// request's correlation.
		req2 := acemq.MustEnvelope(acemq.Fields{ID: "req-2", CorrelationID: "conversation-10"})
		if err := brokertest.Publish(bg, client, brokertest.Outbound{RoutingKey: q, Envelope: req2, Body: body, ReplyTo: viaProperty}); err != nil {
			t.Fatal(err)
		}
		d = e.get(viaProperty)
		if d.CorrelationID != "conversation-10" || str(d.Headers[wire.HeaderCorrelation]) != "conversation-10" {
			t.Fatalf("correlation-id %q, correlation %v; want the request's correlation on both", d.CorrelationID, d.Headers[wire.HeaderCorrelation])
		}
	})
}

// 6. A failing handler: a failure reply with acemq-error and a zero-value
// body, no answer counted, and the request dead-lettered as a rejection.
func TestReplyFailure(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("prices")
		responder := serve(t, conn, q, func(context.Context, acemq.Message[priceRequest]) (quote, error) {
			return quote{Pence: 99}, errors.New("nope")
		})
		replies := e.queue("replies")
		if err := brokertest.Publish(bg, conn, brokertest.Outbound{RoutingKey: q, Body: []byte(`{"sku":"A"}`), ReplyTo: replies, CorrelationID: "c-1"}); err != nil {
			t.Fatal(err)
		}
		d := e.get(replies)
		if str(d.Headers[rpc.HeaderError]) != "Error: nope" {
			t.Fatalf("acemq-error = %v", d.Headers[rpc.HeaderError])
		}
		if string(d.Body) != `{"pence":0}` {
			t.Fatalf("failure reply body %q; want the zero value", d.Body)
		}
		if d.CorrelationID != "c-1" {
			t.Fatalf("failure reply correlation-id %q", d.CorrelationID)
		}
		dead := e.get(contract.DeadLetterQueue(q))
		if r := str(dead.Headers[wire.HeaderError]); r != "the handler rejected it: Error: nope" {
			t.Fatalf("dead-letter reason %q", r)
		}
		if responder.Answered() != 0 {
			t.Fatalf("Answered() = %d after a failure", responder.Answered())
		}
	})
}

// A refused request (an expected business failure): the caller sees the
// same failure at once, through the requester, but the request is accepted,
// not dead-lettered; Refused counts it.
func TestReplyRefused(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("prices")
		errUnknownSKU := errors.New("unknown SKU")
		settled := make(chan acemq.Settlement, 4)
		defer conn.OnSettle(func(s acemq.Settlement) { settled <- s })()
		responder := serve(t, conn, q, func(_ context.Context, m acemq.Message[priceRequest]) (quote, error) {
			if m.Payload.SKU == "nope" {
				return quote{}, rpc.Refuse(fmt.Errorf("pricing %s: %w", m.Payload.SKU, errUnknownSKU))
			}
			return quote{Pence: 100}, nil
		})
		r := open[priceRequest, quote](t, e.connect(), "", q)
		_, err := r.Ask(bg, priceRequest{SKU: "nope"})
		var re *rpc.ResponderError
		if !errors.As(err, &re) || re.Text != "Error: pricing nope: unknown SKU" {
			t.Fatalf("Ask of a refused request: %v, want a *ResponderError with the handler's text", err)
		}
		if s := brokertest.Receive(t, settled); s.Outcome != acemq.OutcomeAcked {
			t.Fatalf("a refused request was settled %s, want acked", s.Outcome)
		}
		if got, err := r.Ask(bg, priceRequest{SKU: "A"}); err != nil || got.Pence != 100 {
			t.Fatalf("a second request: %v, %v", got, err)
		}
		if d := brokertest.Depth(t, e.admin, contract.DeadLetterQueue(q)); d != 0 {
			t.Fatalf("%s holds %d messages; a refused request must not be dead-lettered", contract.DeadLetterQueue(q), d)
		}
		if responder.Refused() != 1 || responder.Answered() != 1 {
			t.Fatalf("Refused() = %d, Answered() = %d; want 1, 1", responder.Refused(), responder.Answered())
		}
		if rpc.Refuse(nil) != nil {
			t.Fatal("Refuse(nil) is not nil")
		}
		if !errors.Is(rpc.Refuse(errUnknownSKU), errUnknownSKU) {
			t.Fatal("Refuse hides the error it marks from errors.Is")
		}
	})
}

// 6 and 7. A request with no reply address is counted unanswerable and
// dead-lettered; the handler never runs.
func TestReplyUnanswerable(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("prices")
		var ran atomic.Bool
		responder := serve(t, conn, q, func(ctx context.Context, m acemq.Message[priceRequest]) (quote, error) {
			ran.Store(true)
			return price(ctx, m)
		})
		if err := brokertest.Publish(bg, conn, brokertest.Outbound{RoutingKey: q, Body: []byte(`{"sku":"A"}`)}); err != nil {
			t.Fatal(err)
		}
		dead := e.get(contract.DeadLetterQueue(q))
		if r := str(dead.Headers[wire.HeaderError]); !strings.Contains(r, "names no reply address") || !strings.HasPrefix(r, "the handler reported an unprocessable message: ") {
			t.Fatalf("dead-letter reason %q", r)
		}
		if responder.Unanswerable() != 1 || responder.Answered() != 0 || ran.Load() {
			t.Fatalf("Unanswerable %d Answered %d handler ran %t", responder.Unanswerable(), responder.Answered(), ran.Load())
		}
	})
}

// 6. A reply that reaches no queue is not an error: answered, acked, not
// retried.
func TestReplyUnroutableIsNotAnError(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		settled := recordSettlements(t, conn)
		q := e.queue("prices")
		responder := serve(t, conn, q, price)
		if err := brokertest.Publish(bg, conn, brokertest.Outbound{RoutingKey: q, Body: []byte(`{"sku":"A"}`), ReplyTo: "gone-" + q}); err != nil {
			t.Fatal(err)
		}
		s := settled.wait(t, 1)[0]
		if s.Outcome != acemq.OutcomeAcked || responder.Answered() != 1 {
			t.Fatalf("outcome %s, Answered %d", s.Outcome, responder.Answered())
		}
		if e.depth(contract.DeadLetterQueue(q)) != 0 || e.depth(q) != 0 {
			t.Fatal("a request whose reply reached no queue was retried or dead-lettered")
		}
	})
}

// 6 and 7. A reply that cannot be published takes its answer back and
// retries the request through the retry policy; so does a failure reply
// that cannot be published.
func TestReplyPublishFails(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		failing := &hooks{publish: func(m driver.Message, send func() error) error {
			if strings.HasPrefix(m.RoutingKey, "refused-") {
				return errors.New("injected publish failure")
			}
			return send()
		}}
		conn := e.connectHooked(failing)
		settled := recordSettlements(t, conn)
		q := e.queue("prices")
		var calls atomic.Int64
		responder := serve(t, conn, q, func(_ context.Context, m acemq.Message[priceRequest]) (quote, error) {
			calls.Add(1)
			if m.Payload.SKU == "fail" {
				return quote{}, errors.New("nope")
			}
			return quote{Pence: 1}, nil
		}, acemq.WithRetry(retry.Fixed(2, time.Millisecond)))

		if err := brokertest.Publish(bg, conn, brokertest.Outbound{RoutingKey: q, Body: []byte(`{"sku":"ok"}`), ReplyTo: "refused-x"}); err != nil {
			t.Fatal(err)
		}
		dead := e.get(contract.DeadLetterQueue(q))
		reason := str(dead.Headers[wire.HeaderError])
		if !strings.HasPrefix(reason, "exhausted 2 attempts: ") || !strings.Contains(reason, "the reply could not be published") {
			t.Fatalf("dead-letter reason %q", reason)
		}
		if calls.Load() != 2 || responder.Answered() != 0 {
			t.Fatalf("handler ran %d times, Answered %d: want 2 runs and the answers taken back", calls.Load(), responder.Answered())
		}
		// A retry that waits in the consumer records its settlement after
		// the copy is confirmed and the original acked, by which time the
		// copy may have been handled and dead-lettered: the two settlements
		// of this message can arrive in either order (docs/consuming.md).
		ss := settled.wait(t, 2)
		slices.SortStableFunc(ss, func(a, b acemq.Settlement) int { return a.Envelope.Attempt() - b.Envelope.Attempt() })
		if len(ss) != 2 || ss[0].Envelope.Attempt() != 1 || ss[1].Envelope.Attempt() != 2 ||
			ss[0].Outcome != acemq.OutcomeRetried || ss[1].Outcome != acemq.OutcomeDeadLettered {
			for _, s := range ss {
				t.Logf("attempt %d: %s", s.Envelope.Attempt(), s.Outcome)
			}
			t.Fatalf("%d settlements; want attempt 1 retried and attempt 2 dead-lettered", len(ss))
		}

		if err := brokertest.Publish(bg, conn, brokertest.Outbound{RoutingKey: q, Body: []byte(`{"sku":"fail"}`), ReplyTo: "refused-y"}); err != nil {
			t.Fatal(err)
		}
		dead = e.get(contract.DeadLetterQueue(q))
		reason = str(dead.Headers[wire.HeaderError])
		if !strings.HasPrefix(reason, "exhausted 2 attempts: ") || !strings.Contains(reason, "the failure reply could not be published") {
			t.Fatalf("dead-letter reason %q", reason)
		}
		if calls.Load() != 4 {
			t.Fatalf("handler ran %d times in all, want 4", calls.Load())
		}
	})
}

// 7. answered is counted before the reply is published: a caller holding
// its answer reads a count that includes it, with no wait. The responder's
// publish of each reply is held, after the reply has gone out, until the
// caller has read the counter, so a count made after the publish would be
// seen missing.
func TestAnsweredBeforeReply(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		checked := make(chan struct{})
		hold := &hooks{publish: func(m driver.Message, send func() error) error {
			err := send()
			if strings.HasPrefix(m.RoutingKey, rpc.ReplyQueuePrefix) {
				select {
				case <-checked:
				case <-time.After(10 * time.Second):
				}
			}
			return err
		}}
		q := e.queue("prices")
		responder := serve(t, e.connectHooked(hold), q, price)
		r := open[priceRequest, quote](t, e.connect(), "", q)
		for i := 1; i <= 20; i++ {
			if _, err := r.Ask(bg, priceRequest{SKU: "A"}); err != nil {
				t.Fatal(err)
			}
			n := responder.Answered()
			checked <- struct{}{}
			if n != int64(i) {
				t.Fatalf("after answer %d, Answered() = %d", i, n)
			}
		}
	})
}

// 7. The counters exist before the consumer subscribes: a backlog handed
// over during start-up is counted like any other request.
func TestCountersCountABacklog(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("backlog")
		r := open[priceRequest, quote](t, conn, "", q)
		const n = 30
		var wg sync.WaitGroup
		for range n {
			wg.Go(func() {
				if _, err := r.Ask(bg, priceRequest{SKU: "A"}); err != nil {
					t.Error(err)
				}
			})
		}
		testenv.Eventually(t, "the backlog to build", func() bool { return e.depth(q) == n })
		responder := serve(t, conn, q, price, acemq.WithConcurrency(4))
		wg.Wait()
		if got := responder.Answered(); got != n {
			t.Fatalf("Answered() = %d right after %d answers arrived", got, n)
		}
	})
}

// 6. An answer the responder's codec cannot encode is a failure: the caller
// gets a failure reply, the request is dead-lettered, no answer is counted.
func TestReplyUnencodable(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("prices")
		responder := serve(t, conn, q, func(context.Context, acemq.Message[priceRequest]) (func(), error) {
			return func() {}, nil
		})
		r := open[priceRequest, json.RawMessage](t, conn, "", q, rpc.WithTimeout(time.Hour))
		_, err := r.Ask(bg, priceRequest{SKU: "A"})
		var re *rpc.ResponderError
		if !errors.As(err, &re) || !strings.Contains(re.Text, "rpc: encoding the reply with application/json") {
			t.Fatalf("Ask = %v; want a responder error about encoding the reply", err)
		}
		dead := e.get(contract.DeadLetterQueue(q))
		if reason := str(dead.Headers[wire.HeaderError]); !strings.HasPrefix(reason, "the handler rejected it: ") {
			t.Fatalf("dead-letter reason %q", reason)
		}
		if responder.Answered() != 0 {
			t.Fatalf("Answered() = %d", responder.Answered())
		}
	})
}

// tableSize is the encoded size of a flat AMQP field table, its length
// prefix included, counted entry by entry; 0 when a value is not a flat
// scalar.
func tableSize(t *testing.T, h driver.Table) int {
	t.Helper()
	n := 4
	for k, v := range h {
		size, ok := wire.ScalarSize(v)
		if !ok {
			return 0
		}
		n += 1 + len(k) + size
	}
	return n
}

// Requests and replies are published with the encoded size of their
// headers (driver.Message.HeaderSize), added up as the headers were
// written, so the driver does not walk them again: answers, failure
// replies and refusals alike.
func TestRequestsAndRepliesCarryHeaderSize(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		type sent struct {
			side string
			m    driver.Message
		}
		var mu sync.Mutex
		var seen []sent
		record := func(side string) *hooks {
			return &hooks{publish: func(m driver.Message, send func() error) error {
				mu.Lock()
				seen = append(seen, sent{side, m})
				mu.Unlock()
				return send()
			}}
		}
		q := e.queue("prices")
		serve(t, e.connectHooked(record("reply")), q, func(ctx context.Context, m acemq.Message[priceRequest]) (quote, error) {
			switch m.Payload.SKU {
			case "broken":
				return quote{}, errors.New("broken")
			case "refused":
				return quote{}, rpc.Refuse(errors.New("no"))
			}
			return price(ctx, m)
		})
		r := open[priceRequest, quote](t, e.connectHooked(record("request")), "", q)
		for _, sku := range []string{"A", "broken", "refused", "B"} {
			if _, err := r.Ask(bg, priceRequest{SKU: sku}); (err != nil) != (sku == "broken" || sku == "refused") {
				t.Fatalf("Ask(%s) = %v", sku, err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		counts := map[string]int{}
		for _, s := range seen {
			if s.side == "reply" && s.m.RoutingKey != r.ReplyQueue() {
				continue // the failed request's dead letter, the consumer's
			}
			counts[s.side]++
			if s.m.HeaderSize <= 0 || s.m.HeaderSize != tableSize(t, s.m.Headers) {
				t.Errorf("a %s was published with HeaderSize %d; its headers encode in %d bytes: %v", s.side, s.m.HeaderSize, tableSize(t, s.m.Headers), s.m.Headers)
			}
		}
		if counts["request"] != 4 || counts["reply"] != 4 {
			t.Fatalf("published %v; want 4 requests and 4 replies", counts)
		}
	})
}
