package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/rpc"
	"github.com/google/uuid"
)

// price is the responder most tests use: 100 pence per character of the SKU.
func price(_ context.Context, m acemq.Message[priceRequest]) (quote, error) {
	return quote{Pence: 100 * len(m.Payload.SKU)}, nil
}

// serve starts a responder closed when the test ends.
func serve[Req, Rep any](t *testing.T, conn *acemq.Conn, queue string, h rpc.Handler[Req, Rep], opts ...acemq.ConsumeOption) *rpc.Responder {
	t.Helper()
	r, err := rpc.Serve(bg, conn, queue, h, opts...)
	if err != nil {
		t.Fatalf("Serve(%s): %v", queue, err)
	}
	t.Cleanup(func() { _ = r.Close(bg) })
	return r
}

// open builds a requester closed when the test ends.
func open[Req, Rep any](t *testing.T, conn *acemq.Conn, exchange, key string, opts ...rpc.RequesterOption) *rpc.Requester[Req, Rep] {
	t.Helper()
	r, err := rpc.Open[Req, Rep](bg, conn, exchange, key, opts...)
	if err != nil {
		t.Fatalf("Open(%q, %q): %v", exchange, key, err)
	}
	t.Cleanup(func() { _ = r.Close(bg) })
	return r
}

// 1. A generated reply queue: acemq-reply-<uuid>, transient, exclusive,
// auto-deleting, classic, no x-expires; the consumer declares nothing.
func TestOpenGeneratedReplyQueue(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("prices")
		r, err := rpc.Open[priceRequest, quote](bg, conn, "", q)
		if err != nil {
			t.Fatal(err)
		}
		name := r.ReplyQueue()
		e.forget(name, contract.DeadLetterQueue(name), contract.ParkedQueue(name))
		if !strings.HasPrefix(name, "acemq-reply-") {
			t.Fatalf("reply queue %q does not start acemq-reply-", name)
		}
		if _, err := uuid.Parse(strings.TrimPrefix(name, "acemq-reply-")); err != nil {
			t.Fatalf("reply queue %q does not end in a UUID: %v", name, err)
		}
		if !r.Consumer().Running() {
			t.Fatal("Open returned a requester whose consumer is not running")
		}
		// Redeclaring with exactly these settings is accepted: non-durable,
		// exclusive, auto-delete, and no arguments at all (classic, no
		// x-expires: both brokers compare those arguments).
		if _, err := brokertest.Driver(conn).DeclareQueue(bg, driver.Queue{Name: name, Exclusive: true, AutoDelete: true}); err != nil {
			t.Fatalf("the reply queue is not transient, exclusive, auto-delete, classic without x-expires: %v", err)
		}
		// Exclusive: another connection may not use it.
		other := e.connect()
		if _, err := brokertest.Driver(other).Consume(bg, driver.ConsumeSpec{Queue: name}); err == nil {
			t.Fatal("another connection could consume the reply queue: it is not exclusive")
		}
		// The reply consumer declared no dead-letter half.
		for _, n := range []string{contract.DeadLetterQueue(name), contract.ParkedQueue(name)} {
			if _, err := brokertest.Driver(e.admin).InspectQueue(bg, n); !isNotFound(err) {
				t.Fatalf("%s: want not found, got %v", n, err)
			}
		}
		if !e.amqp {
			if err := brokertest.Driver(e.admin).InspectExchange(bg, contract.DeadLetterExchange); !isNotFound(err) {
				t.Fatalf("acemq.dlx was declared by a requester: %v", err)
			}
		}
		if err := r.Close(bg); err != nil {
			t.Fatal(err)
		}
		// Auto-delete: the queue goes with its consumer.
		testenv.Eventually(t, "the reply queue to be deleted", func() bool {
			_, err := brokertest.Driver(e.admin).InspectQueue(bg, name)
			return isNotFound(err)
		})
	})
}

// 1. A named reply queue is an ordinary durable quorum queue and outlives
// its requester.
func TestOpenNamedReplyQueue(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("prices")
		serve(t, conn, q, price)
		name := e.name("replies")
		r, err := rpc.Open[priceRequest, quote](bg, conn, "", q, rpc.WithReplyQueue(name))
		if err != nil {
			t.Fatal(err)
		}
		if r.ReplyQueue() != name {
			t.Fatalf("ReplyQueue() = %q, want %q", r.ReplyQueue(), name)
		}
		if _, err := brokertest.Driver(e.admin).DeclareQueue(bg, driver.Queue{Name: name, Durable: true, Args: driver.Table{"x-queue-type": "quorum"}}); err != nil {
			t.Fatalf("the named reply queue is not a durable quorum queue: %v", err)
		}
		got, err := r.Ask(bg, priceRequest{SKU: "A-1"})
		if err != nil || got.Pence != 300 {
			t.Fatalf("Ask = %+v, %v", got, err)
		}
		if _, err := brokertest.Driver(e.admin).InspectQueue(bg, contract.DeadLetterQueue(name)); !isNotFound(err) {
			t.Fatalf("the reply consumer declared %s: %v", contract.DeadLetterQueue(name), err)
		}
		if err := r.Close(bg); err != nil {
			t.Fatal(err)
		}
		if _, err := brokertest.Driver(e.admin).InspectQueue(bg, name); err != nil {
			t.Fatalf("the named reply queue did not survive Close: %v", err)
		}
	})
}

// 1 and 3. No half-built requester: a bad timeout or a connection that
// cannot declare is refused, and nothing is returned.
func TestOpenRefuses(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("prices")
		for _, d := range []time.Duration{0, -time.Second} {
			r, err := rpc.Open[priceRequest, quote](bg, conn, "", q, rpc.WithTimeout(d))
			if err == nil || r != nil {
				t.Fatalf("Open with Timeout(%s) = %v, %v; want a refusal", d, r, err)
			}
			if !strings.Contains(err.Error(), "must be positive") {
				t.Fatalf("Open with Timeout(%s): %v", d, err)
			}
		}
		if r, err := rpc.Open[priceRequest, quote](bg, nil, "", q); err == nil || r != nil {
			t.Fatalf("Open(nil conn) = %v, %v", r, err)
		}
		if r, err := rpc.Open[priceRequest, quote](bg, conn, "", ""); err == nil || r != nil {
			t.Fatalf("Open on the default exchange with no routing key = %v, %v", r, err)
		}
		closed := e.connect()
		if err := closed.Close(bg); err != nil {
			t.Fatal(err)
		}
		if r, err := rpc.Open[priceRequest, quote](bg, closed, "", q); err == nil || r != nil {
			t.Fatalf("Open on a closed connection = %v, %v", r, err)
		}
	})
}

// 2. Ask round trip, from many goroutines, each getting its own answer.
func TestAskConcurrent(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("prices")
		serve(t, conn, q, price, acemq.WithConcurrency(4))
		r := open[priceRequest, quote](t, conn, "", q)
		var wg sync.WaitGroup
		errs := make(chan error, 50)
		for i := range 50 {
			wg.Go(func() {
				sku := strings.Repeat("x", i+1)
				got, err := r.Ask(bg, priceRequest{SKU: sku})
				if err == nil && got.Pence != 100*len(sku) {
					err = fmt.Errorf("asked %q, got %d pence: a reply went to the wrong call", sku, got.Pence)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if n := r.Outstanding(); n != 0 {
			t.Fatalf("Outstanding() = %d after every call returned", n)
		}
	})
}

// 2. The request on the wire: id = correlation = correlation-id = a fresh
// UUID per call; the reply address in the header and the property; the
// caller's envelope kept except its id and correlation.
func TestAskRequestOnTheWire(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect(acemq.WithOrigin("caller@test"))
		q := e.queue("prices")
		seen := make(chan driver.Delivery, 2)
		responder := e.connect()
		rawConsume(t, responder, q, func(d driver.Delivery) {
			seen <- d
			_ = brokertest.Driver(responder).Publish(bg, driver.Message{RoutingKey: d.ReplyTo, CorrelationID: d.CorrelationID, ContentType: "application/json", Body: []byte(`{"pence":1}`)})
		})
		r := open[priceRequest, quote](t, conn, "", q)
		// A delivered envelope, as a handler would pass on: its unknown
		// x-acemq-* headers belong to that delivery, not to a new request.
		delivered := acemq.MustEnvelope(acemq.Fields{
			ID: "caller-id", CorrelationID: "caller-conversation", CausationID: "cause-1",
			Type: "price.request", Version: 3, Headers: map[string]any{"tenant": "t1"},
		}).AppendHeaders(nil, "in")
		delivered["x-acemq-from-a-newer-sibling"] = "v9"
		given := acemq.ReadEnvelope(delivered, "in", "caller-id")
		if _, err := r.Ask(bg, priceRequest{SKU: "A"}, rpc.WithEnvelope(given)); err != nil {
			t.Fatal(err)
		}
		if _, err := r.Ask(bg, priceRequest{SKU: "B"}); err != nil {
			t.Fatal(err)
		}
		first, second := <-seen, <-seen
		for _, d := range []driver.Delivery{first, second} {
			id := str(d.Headers[wire.HeaderID])
			if _, err := uuid.Parse(id); err != nil {
				t.Fatalf("x-acemq-id %q is not a UUID", id)
			}
			if d.MessageID != id || str(d.Headers[wire.HeaderCorrelation]) != id || d.CorrelationID != id {
				t.Fatalf("id %q, message-id %q, correlation %q, correlation-id %q: want all equal", id, d.MessageID, d.Headers[wire.HeaderCorrelation], d.CorrelationID)
			}
			if d.ReplyTo != r.ReplyQueue() || str(d.Headers[rpc.HeaderReplyTo]) != r.ReplyQueue() {
				t.Fatalf("reply-to %q, acemq-reply-to %v; want both %q", d.ReplyTo, d.Headers[rpc.HeaderReplyTo], r.ReplyQueue())
			}
			if d.ContentType != "application/json" || str(d.Headers[wire.HeaderOrigin]) != "caller@test" {
				t.Fatalf("content type %q, origin %v", d.ContentType, d.Headers[wire.HeaderOrigin])
			}
		}
		if first.CorrelationID == second.CorrelationID {
			t.Fatal("two calls shared a correlation id")
		}
		if v, ok := first.Headers["x-acemq-from-a-newer-sibling"]; ok {
			t.Fatalf("a request carried the unknown reserved header of the envelope it was given: %v", v)
		}
		if first.CorrelationID == "caller-id" || first.CorrelationID == "caller-conversation" {
			t.Fatal("the caller's id or correlation was sent instead of the call's")
		}
		h := first.Headers
		if str(h[wire.HeaderType]) != "price.request" || str(h[wire.HeaderCausation]) != "cause-1" || str(h["tenant"]) != "t1" || fmt.Sprint(h[wire.HeaderVersion]) != "3" {
			t.Fatalf("the caller's envelope was not kept: %v", h)
		}
	})
}

// 2. Calls made without WithEnvelope share one map of application headers
// ({acemq-reply-to: the reply queue}); it never reaches anything that
// could change it. A driver that changes a published table after the
// publish, and a call with an envelope of its own headers, leave the next
// call's headers as they were.
func TestAskSharedReplyHeadersStayUnchanged(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		q := e.queue("prices")
		serve(t, e.connect(), q, price)
		var mu sync.Mutex
		var sent []map[string]any
		conn := e.connectHooked(&hooks{publish: func(m driver.Message, send func() error) error {
			mu.Lock()
			snapshot := map[string]any{}
			for k, v := range m.Headers {
				snapshot[k] = v
			}
			sent = append(sent, snapshot)
			mu.Unlock()
			err := send()
			// A driver (or anything after it) that keeps the table and
			// changes it.
			m.Headers["tampered"] = "yes"
			delete(m.Headers, rpc.HeaderReplyTo)
			return err
		}})
		r := open[priceRequest, quote](t, conn, "", q)
		tenant := acemq.MustEnvelope(acemq.Fields{Headers: map[string]any{"tenant": "t1"}})
		for i, opts := range [][]rpc.CallOption{nil, {rpc.WithEnvelope(tenant)}, nil, nil} {
			if _, err := r.Ask(bg, priceRequest{SKU: "A"}, opts...); err != nil {
				t.Fatalf("call %d: %v", i, err)
			}
		}
		want := map[string]any{rpc.HeaderReplyTo: r.ReplyQueue()}
		mu.Lock()
		defer mu.Unlock()
		if len(sent) != 4 {
			t.Fatalf("%d requests published, want 4", len(sent))
		}
		for i, h := range sent {
			app := map[string]any{}
			for k, v := range h {
				if !strings.HasPrefix(k, "x-acemq-") {
					app[k] = v
				}
			}
			if i == 1 {
				want := map[string]any{rpc.HeaderReplyTo: r.ReplyQueue(), "tenant": "t1"}
				if fmt.Sprint(app) != fmt.Sprint(want) {
					t.Fatalf("the call with an envelope sent the application headers %v, want %v", app, want)
				}
				continue
			}
			if fmt.Sprint(app) != fmt.Sprint(want) {
				t.Fatalf("call %d sent the application headers %v, want %v", i, app, want)
			}
		}
		if shared := rpc.ReplyHeaders(r); fmt.Sprint(shared) != fmt.Sprint(want) {
			t.Fatalf("the shared headers became %v, want %v", shared, want)
		}
	})
}

// 2. Requests are mandatory: one that nothing routes fails at once.
func TestAskUnroutable(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		r := open[priceRequest, quote](t, conn, "", "no-such-queue-"+uuid.NewString()[:8], rpc.WithTimeout(time.Hour))
		_, err := r.Ask(bg, priceRequest{SKU: "A"})
		var ue *driver.ReturnError
		if !errors.As(err, &ue) || ue.Code != 312 {
			t.Fatalf("Ask = %v; want a *driver.ReturnError (312)", err)
		}
		if errors.Is(err, rpc.ErrTimeout) || r.TimedOut() != 0 || r.Outstanding() != 0 {
			t.Fatalf("an unroutable request counted as a timeout or stayed outstanding: %v", err)
		}
	})
}

// 3. The responder failed: a *ResponderError with its text, at once (the
// call's deadline is an hour away).
func TestAskResponderError(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("prices")
		responder := serve(t, conn, q, func(_ context.Context, m acemq.Message[priceRequest]) (quote, error) {
			switch m.Payload.SKU {
			case "plain":
				return quote{}, errors.New("out of stock")
			case "typed":
				return quote{}, &stockError{sku: "typed"}
			case "fatal":
				return quote{}, acemq.Fatal(&stockError{sku: "fatal"})
			default:
				panic("boom")
			}
		})
		r := open[priceRequest, quote](t, conn, "", q, rpc.WithTimeout(time.Hour))
		for sku, want := range map[string]string{
			"plain": "Error: out of stock",
			"typed": "stockError: no stock of typed",
			"fatal": "stockError: no stock of fatal",
			"panic": "PanicError: panic: boom",
		} {
			_, err := r.Ask(bg, priceRequest{SKU: sku})
			var re *rpc.ResponderError
			if !errors.As(err, &re) {
				t.Fatalf("%s: Ask = %v; want a *rpc.ResponderError", sku, err)
			}
			if re.Text != want {
				t.Fatalf("%s: Text = %q, want %q", sku, re.Text, want)
			}
			if errors.Is(err, rpc.ErrTimeout) {
				t.Fatalf("%s: a responder error matched ErrTimeout", sku)
			}
		}
		if n := responder.Answered(); n != 0 {
			t.Fatalf("Answered() = %d after four failures; a failure counts no answer", n)
		}
		if r.TimedOut() != 0 {
			t.Fatalf("TimedOut() = %d", r.TimedOut())
		}
	})
}

type stockError struct{ sku string }

func (e *stockError) Error() string { return "no stock of " + e.sku }

// 3. No reply in time: a *TimeoutError that matches ErrTimeout and
// context.DeadlineExceeded; the late reply is accepted and counted
// unmatched.
func TestAskTimeout(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("prices")
		r := open[priceRequest, quote](t, conn, "", q)
		_, err := r.Ask(bg, priceRequest{SKU: "A"}, rpc.WithTimeout(50*time.Millisecond))
		if !errors.Is(err, rpc.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Ask = %v; want ErrTimeout and context.DeadlineExceeded", err)
		}
		var te *rpc.TimeoutError
		if !errors.As(err, &te) || te.Closed || te.Timeout != 50*time.Millisecond {
			t.Fatalf("Ask = %#v", err)
		}
		if !strings.Contains(err.Error(), "may still be queued, running or done") {
			t.Fatalf("the timeout does not say the request may still be handled: %v", err)
		}
		if r.TimedOut() != 1 || r.Outstanding() != 0 {
			t.Fatalf("TimedOut() = %d, Outstanding() = %d", r.TimedOut(), r.Outstanding())
		}
		// The request is still queued: a responder now answers it, and the
		// reply finds nobody waiting.
		responder := serve(t, conn, q, price)
		testenv.Eventually(t, "the late reply to be counted unmatched", func() bool { return r.Unmatched() == 1 })
		if responder.Answered() != 1 {
			t.Fatalf("Answered() = %d", responder.Answered())
		}
		// The unmatched reply was accepted, not dead-lettered.
		if n := brokertest.Depth(t, conn, r.ReplyQueue()); n != 0 {
			t.Fatalf("%d messages left on the reply queue", n)
		}
	})
}

// 3. A call is reused once its Ask returns: the late reply to a call that
// timed out arrives while the next call (on the same requester, so on the
// reused call) is outstanding, is counted unmatched, and the next call
// still gets its own answer.
func TestAskLateReplyWhileNextOutstanding(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("prices")
		release := map[string]chan struct{}{"slow": make(chan struct{}), "next-call": make(chan struct{})}
		serve(t, conn, q, func(ctx context.Context, m acemq.Message[priceRequest]) (quote, error) {
			select {
			case <-release[m.Payload.SKU]:
			case <-ctx.Done():
			}
			return price(ctx, m)
		}, acemq.WithConcurrency(2))
		r := open[priceRequest, quote](t, conn, "", q)
		if _, err := r.Ask(bg, priceRequest{SKU: "slow"}, rpc.WithTimeout(50*time.Millisecond)); !errors.Is(err, rpc.ErrTimeout) {
			t.Fatalf("Ask(slow) = %v; want a timeout", err)
		}
		type answer struct {
			q   quote
			err error
		}
		next := make(chan answer, 1)
		go func() {
			q, err := r.Ask(bg, priceRequest{SKU: "next-call"}, rpc.WithTimeout(time.Hour))
			next <- answer{q, err}
		}()
		testenv.Eventually(t, "the next call to be outstanding", func() bool { return r.Outstanding() == 1 })
		close(release["slow"])
		testenv.Eventually(t, "the late reply to be counted unmatched", func() bool { return r.Unmatched() == 1 })
		select {
		case a := <-next:
			t.Fatalf("the late reply ended the next call: %+v, %v", a.q, a.err)
		default:
		}
		close(release["next-call"])
		if a := <-next; a.err != nil || a.q.Pence != 100*len("next-call") {
			t.Fatalf("the next call got %+v, %v; want its own answer", a.q, a.err)
		}
		if r.Unmatched() != 1 || r.TimedOut() != 1 {
			t.Fatalf("Unmatched() = %d, TimedOut() = %d", r.Unmatched(), r.TimedOut())
		}
	})
}

// 3. The requester-wide timeout, the per-call one overriding it, a context
// deadline shorter than both, and a cancelled context.
func TestAskTimeoutSources(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		silent := e.queue("silent")
		answering := e.queue("prices")
		serve(t, conn, answering, price)

		short := open[priceRequest, quote](t, conn, "", silent, rpc.WithTimeout(30*time.Millisecond))
		if short.Timeout() != 30*time.Millisecond {
			t.Fatalf("Timeout() = %s", short.Timeout())
		}
		if _, err := short.Ask(bg, priceRequest{SKU: "A"}); !errors.Is(err, rpc.ErrTimeout) {
			t.Fatalf("requester-wide timeout: %v", err)
		}
		shortAnswering := open[priceRequest, quote](t, conn, "", answering, rpc.WithTimeout(time.Nanosecond))
		if got, err := shortAnswering.Ask(bg, priceRequest{SKU: "AB"}, rpc.WithTimeout(time.Hour)); err != nil || got.Pence != 200 {
			t.Fatalf("per-call timeout overriding the requester's: %+v, %v", got, err)
		}

		long := open[priceRequest, quote](t, conn, "", silent, rpc.WithTimeout(time.Hour))
		ctx, cancel := context.WithTimeout(bg, 30*time.Millisecond)
		defer cancel()
		_, err := long.Ask(ctx, priceRequest{SKU: "A"})
		if !errors.Is(err, rpc.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("context deadline: %v", err)
		}
		if !strings.Contains(err.Error(), "context's deadline") {
			t.Fatalf("the error does not say the context's deadline ended the call: %v", err)
		}

		ctx, cancel = context.WithCancel(bg)
		go func() {
			testenv.Eventually(t, "the call to be outstanding", func() bool { return long.Outstanding() == 1 })
			cancel()
		}()
		_, err = long.Ask(ctx, priceRequest{SKU: "A"})
		if !errors.Is(err, context.Canceled) || !errors.Is(err, rpc.ErrTimeout) || errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("cancelled context: %v", err)
		}
		if long.TimedOut() != 2 {
			t.Fatalf("TimedOut() = %d, want 2", long.TimedOut())
		}

		for _, d := range []time.Duration{0, -time.Millisecond} {
			before := e.depth(silent)
			if _, err := long.Ask(bg, priceRequest{SKU: "A"}, rpc.WithTimeout(d)); err == nil || !strings.Contains(err.Error(), "must be positive") {
				t.Fatalf("Ask with Timeout(%s): %v", d, err)
			}
			if e.depth(silent) != before {
				t.Fatalf("a call refused for its timeout was published")
			}
		}
	})
}

// 3. A reply the codec cannot read fails the call at once with the codec's
// error.
func TestAskUndecodableReply(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("prices")
		responder := e.connect()
		rawConsume(t, responder, q, func(d driver.Delivery) {
			m := driver.Message{RoutingKey: d.ReplyTo, CorrelationID: d.CorrelationID, ContentType: "application/json", Body: []byte("not json")}
			if string(d.Body) == `{"sku":"text"}` {
				m.ContentType, m.Body = "text/plain", []byte("hello")
			}
			_ = brokertest.Driver(responder).Publish(bg, m)
		})
		r := open[priceRequest, quote](t, conn, "", q, rpc.WithTimeout(time.Hour))
		for _, sku := range []string{"json", "text"} {
			_, err := r.Ask(bg, priceRequest{SKU: sku})
			var de *acemq.DecodeError
			if !errors.As(err, &de) || errors.Is(err, rpc.ErrTimeout) {
				t.Fatalf("%s: Ask = %v; want the codec's *acemq.DecodeError", sku, err)
			}
		}
	})
}

// 4. Close fails every outstanding call at once with the timeout error type
// and a sentence saying the requester was closed; closing the connection
// does the same.
func TestCloseFailsOutstanding(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		q := e.queue("silent")
		for _, how := range []string{"requester", "connection"} {
			conn := e.connect()
			r := open[priceRequest, quote](t, conn, "", q, rpc.WithTimeout(time.Hour))
			const n = 5
			errs := make(chan error, n)
			for range n {
				go func() {
					_, err := r.Ask(bg, priceRequest{SKU: "A"})
					errs <- err
				}()
			}
			testenv.Eventually(t, "every call to be outstanding", func() bool { return r.Outstanding() == n })
			var err error
			if how == "requester" {
				err = r.Close(bg)
			} else {
				err = conn.Close(bg)
			}
			if err != nil {
				t.Fatal(err)
			}
			for range n {
				err := <-errs
				var te *rpc.TimeoutError
				if !errors.As(err, &te) || !te.Closed {
					t.Fatalf("%s closed: Ask = %v; want a *rpc.TimeoutError with Closed", how, err)
				}
				if !errors.Is(err, rpc.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) || !errors.Is(err, rpc.ErrClosed) {
					t.Fatalf("%s closed: %v does not match ErrTimeout, DeadlineExceeded and ErrClosed", how, err)
				}
				want := "the requester was closed while request"
				if how == "connection" {
					want = "the reply consumer stopped (was the connection closed?) while request"
				}
				if !strings.Contains(err.Error(), want) || !strings.Contains(err.Error(), "was outstanding") {
					t.Fatalf("%s closed: %q does not say %q … was outstanding", how, err, want)
				}
			}
			if r.TimedOut() != n {
				t.Fatalf("TimedOut() = %d, want %d", r.TimedOut(), n)
			}
			if _, err := r.Ask(bg, priceRequest{SKU: "A"}); !errors.Is(err, rpc.ErrClosed) {
				t.Fatalf("Ask after %s close = %v; want ErrClosed", how, err)
			} else if n := strings.Count(err.Error(), "rpc: "); n != 1 {
				t.Fatalf("Ask after %s close = %q: says rpc: %d times, want once", how, err, n)
			}
			if err := r.Close(bg); err != nil {
				t.Fatalf("a second Close: %v", err)
			}
		}
	})
}
