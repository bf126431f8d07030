package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unicode/utf8"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/internal/tuning"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
)

// The engine's decision paths (docs/wire.md §6), each run on memory:// here and
// on RabbitMQ in consume_rabbit_test.go.
var enginePaths = []struct {
	name string
	run  func(t *testing.T, b backend)
}{
	{"Accept", testAccept},
	{"RetryThroughBrokerRung", testRetryThroughBrokerRung},
	{"RetryWaitsInConsumer", testRetryWaitsInConsumer},
	{"Exhausted", testExhausted},
	{"DefaultPolicyDeadLettersAtOnce", testDefaultPolicy},
	{"AgeLimit", testAgeLimit},
	{"Park", testPark},
	{"RejectAndFatal", testRejectAndFatal},
	{"Undecodable", testUndecodable},
	{"RetryableDecodeError", testRetryableDecodeError},
	{"Panic", testPanic},
	{"InProgress", testInProgress},
	{"MissingRung", testMissingRung},
	{"MissingDeadLetterQueue", testMissingDeadLetterQueue},
	{"PutBackCountsTowardDeliveryLimit", testPutBackCountsTowardDeliveryLimit},
	{"DrainFinishesRunningHandlers", testDrainFinishes},
	{"DrainTimesOut", testDrainTimesOut},
	{"Concurrency", testConcurrency},
	{"OrderWithOneHandler", testOrder},
	{"UnknownReservedHeaderCarried", testUnknownHeaderCarried},
	{"StaleAttemptHeader", testStaleAttempt},
	{"HugeErrorIsCut", testHugeErrorIsCut},
}

func TestEngineMemory(t *testing.T) {
	for _, p := range enginePaths {
		t.Run(p.name, func(t *testing.T) {
			t.Parallel()
			p.run(t, memoryBackend)
		})
	}
}

var errTransient = errors.New("the stock service timed out")

// readEnvelope reads a delivery's envelope as the consumer would.
func readEnvelope(d driver.Delivery) acemq.Envelope {
	return acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
}

// checkSetAside checks a copy set aside in a .dlq or .parked queue: the
// original bytes, content type and id, the reason, and the attempt.
func checkSetAside(t *testing.T, d driver.Delivery, orig acemq.Envelope, body, reason string, attempt int) {
	t.Helper()
	env := readEnvelope(d)
	if string(d.Body) != body {
		t.Errorf("body %q, want the original %q", d.Body, body)
	}
	if d.ContentType != "application/json" {
		t.Errorf("content type %q", d.ContentType)
	}
	if d.MessageID != orig.ID() || env.ID() != orig.ID() {
		t.Errorf("id %q / message-id %q, want %q", env.ID(), d.MessageID, orig.ID())
	}
	if env.CorrelationID() != orig.CorrelationID() {
		t.Errorf("correlation %q, want %q", env.CorrelationID(), orig.CorrelationID())
	}
	if !env.FirstSeen().Equal(orig.FirstSeen()) {
		t.Errorf("first seen %v, want %v", env.FirstSeen(), orig.FirstSeen())
	}
	if env.Reason() != reason {
		t.Errorf("x-acemq-error = %q, want %q", env.Reason(), reason)
	}
	if env.Attempt() != attempt {
		t.Errorf("attempt %d, want %d", env.Attempt(), attempt)
	}
	if !d.Persistent {
		t.Error("the copy is not persistent")
	}
}

func checkSettlement(t *testing.T, s acemq.Settlement, decision acemq.Decision, outcome acemq.Outcome, target string) {
	t.Helper()
	if s.Decision != decision || s.Outcome != outcome || s.Target != target {
		t.Errorf("settlement decision %v outcome %q target %q, want %v %q %q (%+v)", s.Decision, s.Outcome, s.Target, decision, outcome, target, s)
	}
}

func testAccept(t *testing.T, b backend) {
	r := newRig(t, b)
	got := make(chan acemq.Message[order], 1)
	consume(r, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		got <- m
		return acemq.Accept()
	})
	env := r.publish("o-1", acemq.Envelope{})
	m := <-got
	if m.Payload.ID != "o-1" || m.Envelope.ID() != env.ID() || m.Queue != r.q || m.Envelope.Attempt() != 1 {
		t.Errorf("handler saw %+v", m)
	}
	s := r.next()
	checkSettlement(t, s, acemq.DecisionAccept, acemq.OutcomeAcked, "")
	if s.Queue != r.q || s.Envelope.ID() != env.ID() {
		t.Errorf("settlement %+v", s)
	}
	r.messages(r.q, 0)
}

func testRetryThroughBrokerRung(t *testing.T, b backend) {
	r := newRig(t, b)
	type seen struct {
		attempt int
		id, key string
		death   bool
		body    string
	}
	got := make(chan seen, 4)
	consume(r, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		_, death := m.Envelope.Header("x-death")
		got <- seen{m.Envelope.Attempt(), m.Envelope.ID(), m.RoutingKey, death, string(m.Body)}
		if m.Envelope.Attempt() == 1 {
			return acemq.Retry(errTransient)
		}
		return acemq.Accept()
	}, acemq.WithRetry(retry.Fixed(2, time.Second).WaitInBrokerFrom(time.Second)))
	rung := r.q + ".retry.1s"
	if _, err := brokertest.Driver(r.conn).InspectQueue(context.Background(), rung); err != nil {
		t.Fatalf("the consumer did not declare its rung: %v", err)
	}
	env := r.publish("o-2", acemq.Envelope{})

	s := r.next()
	checkSettlement(t, s, acemq.DecisionRetry, acemq.OutcomeRetried, rung)
	if s.Where != acemq.WhereBroker || s.Delay != time.Second || s.RungMissing != "" {
		t.Errorf("retry held %q for %v (rung missing %q), want the broker for exactly 1s", s.Where, s.Delay, s.RungMissing)
	}
	if s.Reason != "Error: "+errTransient.Error() {
		t.Errorf("reason %q", s.Reason)
	}
	first, second := <-got, <-got
	if first.attempt != 1 || second.attempt != 2 || second.id != env.ID() {
		t.Errorf("attempts %d then %d (id %q, want %q)", first.attempt, second.attempt, second.id, env.ID())
	}
	if second.key != r.q || !second.death || second.body != first.body {
		t.Errorf("the second delivery came with routing key %q, x-death %v, body %q: it did not return through the rung", second.key, second.death, second.body)
	}
	s = r.next()
	checkSettlement(t, s, acemq.DecisionAccept, acemq.OutcomeAcked, "")
	if s.Envelope.Attempt() != 2 {
		t.Errorf("accepted attempt %d", s.Envelope.Attempt())
	}
	r.messages(rung, 0)
}

func testRetryWaitsInConsumer(t *testing.T, b backend) {
	r := newRig(t, b)
	consume(r, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		if m.Envelope.Attempt() < 3 {
			return acemq.Retry(errTransient)
		}
		return acemq.Accept()
	}, acemq.WithRetry(retry.Fixed(3, 20*time.Millisecond)))
	env := r.publish("o-3", acemq.Envelope{})
	ss := r.byAttempt(3)
	for i, s := range ss[:2] {
		checkSettlement(t, s, acemq.DecisionRetry, acemq.OutcomeRetried, r.q)
		if s.Where != acemq.WhereConsumer || s.Delay != 20*time.Millisecond || s.Envelope.Attempt() != i+1 {
			t.Errorf("attempt %d: held %q for %v", s.Envelope.Attempt(), s.Where, s.Delay)
		}
	}
	s := ss[2]
	checkSettlement(t, s, acemq.DecisionAccept, acemq.OutcomeAcked, "")
	if s.Envelope.Attempt() != 3 || s.Envelope.ID() != env.ID() {
		t.Errorf("accepted attempt %d id %q", s.Envelope.Attempt(), s.Envelope.ID())
	}
	// No rung for a consumer-side policy.
	if _, err := brokertest.Driver(r.conn).InspectQueue(context.Background(), r.q+".retry.20ms"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("a rung was declared for a consumer wait: %v", err)
	}
}

func testExhausted(t *testing.T, b backend) {
	r := newRig(t, b)
	var calls atomic.Int32
	consume(r, func(context.Context, acemq.Message[order]) acemq.Ack {
		calls.Add(1)
		return acemq.Retry(errTransient)
	}, acemq.WithRetry(retry.Fixed(2, 10*time.Millisecond)))
	env := r.publish("o-4", acemq.Envelope{})
	ss := r.byAttempt(2)
	checkSettlement(t, ss[0], acemq.DecisionRetry, acemq.OutcomeRetried, r.q)
	s := ss[1]
	reason := "exhausted 2 attempts: Error: " + errTransient.Error()
	checkSettlement(t, s, acemq.DecisionRetry, acemq.OutcomeDeadLettered, r.q+".dlq")
	if s.Reason != reason || !errors.Is(s.Err, errTransient) {
		t.Errorf("reason %q err %v", s.Reason, s.Err)
	}
	checkSetAside(t, r.get(r.q+".dlq"), env, `{"id":"o-4"}`, reason, 2)
	if n := calls.Load(); n != 2 {
		t.Errorf("the handler ran %d times, want 2", n)
	}
	r.messages(r.q, 0)
}

func testDefaultPolicy(t *testing.T, b backend) {
	r := newRig(t, b)
	consume(r, func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Retry(errTransient) })
	env := r.publish("o-5", acemq.Envelope{})
	s := r.next()
	reason := "exhausted 1 attempts: Error: " + errTransient.Error()
	checkSettlement(t, s, acemq.DecisionRetry, acemq.OutcomeDeadLettered, r.q+".dlq")
	checkSetAside(t, r.get(r.q+".dlq"), env, `{"id":"o-5"}`, reason, 1)
}

func testAgeLimit(t *testing.T, b backend) {
	r := newRig(t, b)
	consume(r, func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Retry(errTransient) },
		acemq.WithRetry(retry.Exponential(5, 10*time.Millisecond, time.Second).GiveUpAfter(time.Minute)))
	old := acemq.MustEnvelope(acemq.Fields{FirstSeen: time.Now().Add(-2 * time.Minute)})
	r.publish("o-6", old)
	s := r.next()
	reason := "exceeded the maximum message age of 1m0s: Error: " + errTransient.Error()
	checkSettlement(t, s, acemq.DecisionRetry, acemq.OutcomeDeadLettered, r.q+".dlq")
	checkSetAside(t, r.get(r.q+".dlq"), old, `{"id":"o-6"}`, reason, 1)

	// A message without a first-seen (a foreign producer) has an unknown
	// age, which is young enough: it is retried.
	r.publishRaw(driver.Message{ContentType: "application/json", MessageID: "foreign-1", Body: []byte(`{"id":"o-7"}`)})
	s = r.next()
	if s.Outcome != acemq.OutcomeRetried || s.Envelope.ID() != "foreign-1" {
		t.Errorf("a message of unknown age: %+v", s)
	}
}

func testPark(t *testing.T, b backend) {
	r := newRig(t, b)
	consume(r, func(context.Context, acemq.Message[order]) acemq.Ack {
		return acemq.Park(errors.New("needs a human"))
	}, acemq.WithRetry(retry.Fixed(5, 10*time.Millisecond)))
	env := r.publish("o-8", acemq.Envelope{})
	s := r.next()
	reason := "the handler parked it: Error: needs a human"
	checkSettlement(t, s, acemq.DecisionPark, acemq.OutcomeParked, r.q+".parked")
	checkSetAside(t, r.get(r.q+".parked"), env, `{"id":"o-8"}`, reason, 1)
	r.messages(r.q+".dlq", 0)
}

type validationError struct{ field string }

func (e *validationError) Error() string { return "the field " + e.field + " is missing" }

func testRejectAndFatal(t *testing.T, b backend) {
	r := newRig(t, b)
	consume(r, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		if m.Payload.ID == "o-9" {
			return acemq.Reject(&validationError{"sku"})
		}
		// A fatal error is never retried, whatever the policy.
		return acemq.FromError(acemq.Fatal(fmt.Errorf("order %s: %w", m.Payload.ID, &validationError{"qty"})))
	}, acemq.WithRetry(retry.Fixed(5, 10*time.Millisecond)))

	env := r.publish("o-9", acemq.Envelope{})
	s := r.next()
	reason := "the handler rejected it: validationError: the field sku is missing"
	checkSettlement(t, s, acemq.DecisionReject, acemq.OutcomeRejected, r.q+".dlq")
	checkSetAside(t, r.get(r.q+".dlq"), env, `{"id":"o-9"}`, reason, 1)

	env = r.publish("o-10", acemq.Envelope{})
	s = r.next()
	reason = "the handler reported an unprocessable message: Error: order o-10: the field qty is missing"
	checkSettlement(t, s, acemq.DecisionReject, acemq.OutcomeRejected, r.q+".dlq")
	if !acemq.IsFatal(s.Err) {
		t.Errorf("settlement error %v is not marked fatal", s.Err)
	}
	checkSetAside(t, r.get(r.q+".dlq"), env, `{"id":"o-10"}`, reason, 1)
}

func testUndecodable(t *testing.T, b backend) {
	r := newRig(t, b)
	var calls atomic.Int32
	consume(r, func(context.Context, acemq.Message[order]) acemq.Ack {
		calls.Add(1)
		return acemq.Accept()
	}, acemq.WithRetry(retry.Fixed(5, 10*time.Millisecond)))
	env := acemq.MustEnvelope(acemq.Fields{})
	body := `{"id": "o-11"` // truncated
	if err := brokertest.Publish(context.Background(), r.conn, brokertest.Outbound{RoutingKey: r.q, Envelope: env, ContentType: "application/json", Body: []byte(body)}); err != nil {
		t.Fatal(err)
	}
	s := r.next()
	checkSettlement(t, s, acemq.DecisionPark, acemq.OutcomeParked, r.q+".parked")
	d := r.get(r.q + ".parked")
	checkSetAside(t, d, env, body, readEnvelope(d).Reason(), 1)
	if e := readEnvelope(d).Reason(); !strings.HasPrefix(e, "could not be decoded: ") || e != s.Reason {
		t.Errorf("x-acemq-error %q (settlement %q)", e, s.Reason)
	}
	// The cause follows the prefix as TypeName: message, without the
	// DecodeError's own prose repeating the prefix, and names the content type.
	if e := s.Reason; !strings.HasPrefix(e, "could not be decoded: SyntaxError: ") || strings.Contains(e, "could not decode") || !strings.HasSuffix(e, "(content type application/json)") {
		t.Errorf("x-acemq-error %q: want the codec's error as TypeName: message and the content type", e)
	}
	if calls.Load() != 0 {
		t.Error("the handler saw a body that could not be decoded")
	}
}

// flakyCodec is JSON whose first decode fails with a retryable error, as a
// claim-check store that is briefly down would.
type flakyCodec struct{ failures atomic.Int32 }

func (c *flakyCodec) ContentType() string          { return acemq.JSON.ContentType() }
func (c *flakyCodec) Accepts(ct string) bool       { return acemq.JSON.Accepts(ct) }
func (c *flakyCodec) Encode(v any) ([]byte, error) { return acemq.JSON.Encode(v) }
func (c *flakyCodec) Decode(body []byte, ct string, v any) error {
	if c.failures.Add(-1) >= 0 {
		return &acemq.DecodeError{ContentType: ct, Retryable: true, Err: errors.New("the payload store is unavailable")}
	}
	return acemq.JSON.Decode(body, ct, v)
}

func testRetryableDecodeError(t *testing.T, b backend) {
	r := newRig(t, b)
	codec := &flakyCodec{}
	codec.failures.Store(1)
	consume(r, func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Accept() },
		acemq.WithCodec(codec), acemq.WithRetry(retry.Fixed(2, 10*time.Millisecond)))
	r.publish("o-12", acemq.Envelope{})
	ss := r.byAttempt(2)
	s := ss[0]
	checkSettlement(t, s, acemq.DecisionRetry, acemq.OutcomeRetried, r.q)
	var de *acemq.DecodeError
	if !errors.As(s.Err, &de) || !de.Retryable {
		t.Errorf("settlement error %v", s.Err)
	}
	s = ss[1]
	checkSettlement(t, s, acemq.DecisionAccept, acemq.OutcomeAcked, "")

	// Under the default policy the same failure dead-letters (it is a
	// retry with no attempts left), it is not parked.
	codec.failures.Store(1)
	r2 := newRig(t, b)
	consume(r2, func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Accept() }, acemq.WithCodec(codec))
	r2.publish("o-13", acemq.Envelope{})
	checkSettlement(t, r2.next(), acemq.DecisionRetry, acemq.OutcomeDeadLettered, r2.q+".dlq")
}

func testPanic(t *testing.T, b backend) {
	r := newRig(t, b)
	consume(r, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		if m.Payload.ID == "o-14" {
			panic(fmt.Sprintf("the stock of %s went negative", m.Payload.ID))
		}
		return acemq.Accept()
	}, acemq.WithRetry(retry.Fixed(5, 10*time.Millisecond)))
	env := r.publish("o-14", acemq.Envelope{})
	s := r.next()
	checkSettlement(t, s, acemq.DecisionReject, acemq.OutcomeRejected, r.q+".dlq")
	var pe *acemq.PanicError
	if !errors.As(s.Err, &pe) || len(pe.Stack) == 0 {
		t.Errorf("settlement error %v, want a *PanicError with a stack", s.Err)
	}
	const prefix = "the handler reported an unprocessable message: "
	if !strings.HasPrefix(s.Reason, prefix) || !strings.Contains(s.Reason, "the stock of o-14 went negative") {
		t.Errorf("reason %q", s.Reason)
	}
	checkSetAside(t, r.get(r.q+".dlq"), env, `{"id":"o-14"}`, s.Reason, 1)
	// The consumer goes on.
	r.publish("o-15", acemq.Envelope{})
	checkSettlement(t, r.next(), acemq.DecisionAccept, acemq.OutcomeAcked, "")
}

func testInProgress(t *testing.T, b backend) {
	r := newRig(t, b)
	var calls atomic.Int32
	consume(r, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		if calls.Add(1) == 1 {
			return acemq.InProgress(50 * time.Millisecond)
		}
		return acemq.Accept()
	}, acemq.WithRetry(retry.Fixed(2, 10*time.Millisecond)))
	env := r.publish("o-16", acemq.Envelope{})
	ss := r.byAttempt(2)
	if ss[0].Outcome != acemq.OutcomeInProgress {
		ss[0], ss[1] = ss[1], ss[0]
	}
	s := ss[0]
	checkSettlement(t, s, acemq.DecisionInProgress, acemq.OutcomeInProgress, r.q)
	if s.Delay != 50*time.Millisecond || s.Where != acemq.WhereConsumer {
		t.Errorf("in-progress held %q for %v", s.Where, s.Delay)
	}
	s = ss[1]
	checkSettlement(t, s, acemq.DecisionAccept, acemq.OutcomeAcked, "")
	if s.Envelope.Attempt() != 1 || s.Envelope.ID() != env.ID() {
		t.Errorf("after in-progress: attempt %d id %q, want attempt 1 id %q", s.Envelope.Attempt(), s.Envelope.ID(), env.ID())
	}
	if acemq.InProgress(0).Delay() != tuning.InProgressDelay || tuning.InProgressDelay != 5*time.Second {
		t.Errorf("default in-progress delay %v", acemq.InProgress(0).Delay())
	}
}

func testMissingRung(t *testing.T, b backend) {
	r := newRig(t, b)
	deaths := make(chan bool, 2)
	consume(r, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		_, death := m.Envelope.Header("x-death")
		deaths <- death
		if m.Envelope.Attempt() == 1 {
			return acemq.Retry(errTransient)
		}
		return acemq.Accept()
	}, acemq.WithRetry(retry.Fixed(2, time.Second).WaitInBrokerFrom(time.Second)))
	rung := r.q + ".retry.1s"
	if _, err := brokertest.Driver(r.conn).DeleteQueue(context.Background(), rung); err != nil {
		t.Fatal(err)
	}
	r.publish("o-17", acemq.Envelope{})
	ss := r.byAttempt(2)
	s := ss[0]
	checkSettlement(t, s, acemq.DecisionRetry, acemq.OutcomeRetried, r.q)
	if s.RungMissing != rung || s.Where != acemq.WhereConsumer || s.Delay != time.Second {
		t.Errorf("rung missing %q, held %q for %v; want %q counted and 1s in the consumer", s.RungMissing, s.Where, s.Delay, rung)
	}
	s = ss[1]
	checkSettlement(t, s, acemq.DecisionAccept, acemq.OutcomeAcked, "")
	if s.Envelope.Attempt() != 2 {
		t.Errorf("accepted attempt %d", s.Envelope.Attempt())
	}
	if first, second := <-deaths, <-deaths; first || second {
		t.Error("a delivery went through the broker's dead-lettering although the rung was missing")
	}
}

func testMissingDeadLetterQueue(t *testing.T, b backend) {
	r := newRig(t, b)
	type seen struct {
		redelivered bool
		attempt     int
	}
	got := make(chan seen, 4)
	var calls atomic.Int32
	consume(r, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		got <- seen{m.Redelivered, m.Envelope.Attempt()}
		if calls.Add(1) == 1 {
			return acemq.Reject(errors.New("bad order"))
		}
		return acemq.Accept()
	})
	if _, err := brokertest.Driver(r.conn).DeleteQueue(context.Background(), r.q+".dlq"); err != nil {
		t.Fatal(err)
	}
	r.publish("o-18", acemq.Envelope{})
	s := r.next()
	if s.Outcome != acemq.OutcomeRequeued || s.SetAsideFailed != r.q+".dlq" || s.Decision != acemq.DecisionReject {
		t.Errorf("settlement %+v, want requeued with the .dlq counted", s)
	}
	var ue *driver.ReturnError
	if !errors.As(s.SettleErr, &ue) || ue.Code != 312 {
		t.Errorf("settle error %v, want an unroutable error", s.SettleErr)
	}
	// Put back, never dropped: it comes again, redelivered, same attempt.
	first, second := <-got, <-got
	if first.redelivered || !second.redelivered || second.attempt != 1 {
		t.Errorf("deliveries %+v then %+v", first, second)
	}
	checkSettlement(t, r.next(), acemq.DecisionAccept, acemq.OutcomeAcked, "")
}

// testPutBackCountsTowardDeliveryLimit: a delivery the engine puts back
// because its set-aside copy could not be published goes back as failed
// (basic.reject), so a quorum queue's delivery limit ends the loop on every
// broker version: on RabbitMQ 4.3 (and memory://) a nack would not count,
// and the message would come back for ever.
func testPutBackCountsTowardDeliveryLimit(t *testing.T, b backend) {
	r := newRig(t, b)
	ctx := context.Background()
	q, catch := r.q+".limited", r.q+".catch"
	r.mu.Lock()
	r.cleanup = append(r.cleanup, q, catch)
	r.mu.Unlock()
	tr := brokertest.Driver(r.conn)
	if _, err := tr.DeclareQueue(ctx, driver.Queue{Name: catch, Durable: true}); err != nil {
		t.Fatal(err)
	}
	const limit = 2
	if _, err := tr.DeclareQueue(ctx, driver.Queue{Name: q, Durable: true, Args: driver.Table{
		"x-queue-type": "quorum", "x-delivery-limit": int32(limit),
		"x-dead-letter-exchange": "", "x-dead-letter-routing-key": catch,
	}}); err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	// No declarations: {q}.dlq does not exist, so every set-aside fails.
	c, err := acemq.Consume(ctx, r.conn, q, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		calls.Add(1)
		return acemq.Reject(errors.New("bad order"))
	}, acemq.WithDeclarations(false), acemq.WithPrefetch(1))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	r.publishRaw(driver.Message{RoutingKey: q, MessageID: "o-limit", ContentType: "application/json", Body: []byte(`{"id":"o-limit"}`)})
	d := brokertest.Get(t, r.conn, catch)
	if d.MessageID != "o-limit" || d.Headers["x-first-death-reason"] != "delivery_limit" {
		t.Errorf("dead letter %q, reason %#v; want o-limit, delivery_limit", d.MessageID, d.Headers["x-first-death-reason"])
	}
	if n := calls.Load(); n != limit+1 {
		t.Errorf("the handler ran %d times; want %d (the limit, plus one)", n, limit+1)
	}
	for range limit + 1 {
		if s := r.next(); s.Outcome != acemq.OutcomeRequeued || s.SetAsideFailed != contract.DeadLetterQueue(q) {
			t.Errorf("settlement %+v; want requeued with the set-aside failed", s)
		}
	}
}

func testDrainFinishes(t *testing.T, b backend) {
	r := newRig(t, b)
	started := make(chan struct{}, 10)
	release := make(chan struct{})
	ctxErr := make(chan error, 10)
	c := consume(r, func(ctx context.Context, m acemq.Message[order]) acemq.Ack {
		started <- struct{}{}
		<-release
		ctxErr <- ctx.Err()
		return acemq.Accept()
	}, acemq.WithPrefetch(10), acemq.WithDrainTimeout(10*time.Second))
	for i := range 5 {
		r.publish(fmt.Sprintf("o-%d", 20+i), acemq.Envelope{})
	}
	<-started
	// Wait until the broker has handed over more than the running one.
	r.messages(r.q, 0)
	closed := make(chan error, 1)
	go func() { closed <- c.Close(context.Background()) }()
	testenv.Eventually(t, "the consumer to stop running", func() bool { return !c.Running() })
	close(release)
	if err := <-closed; err != nil {
		t.Fatalf("Close: %v", err)
	}
	select {
	case <-c.Done():
	default:
		t.Error("Done is not closed after Close")
	}
	if err := <-ctxErr; err != nil {
		t.Errorf("the running handler's context ended during the drain: %v", err)
	}
	checkSettlement(t, r.next(), acemq.DecisionAccept, acemq.OutcomeAcked, "")
	// The four delivered but not started went back, never run.
	r.messages(r.q, 4)
	if n := len(started); n != 0 {
		t.Errorf("%d more handlers started after Close", n)
	}
	if err := c.Close(context.Background()); err != nil {
		t.Errorf("a second Close: %v", err)
	}
}

func testDrainTimesOut(t *testing.T, b backend) {
	r := newRig(t, b)
	release := make(chan struct{})
	var releaseOnce sync.Once
	t.Cleanup(func() { releaseOnce.Do(func() { close(release) }) })
	ctxDone := make(chan struct{})
	c := consume(r, func(ctx context.Context, m acemq.Message[order]) acemq.Ack {
		<-ctx.Done() // cancelled when the drain runs out
		close(ctxDone)
		<-release
		return acemq.Retry(ctx.Err())
	}, acemq.WithDrainTimeout(300*time.Millisecond), acemq.WithRetry(retry.Fixed(3, 10*time.Millisecond)))
	r.publish("o-30", acemq.Envelope{})
	testenv.Eventually(t, "the handler to start", func() bool { return c.InFlight() == 1 })
	err := c.Close(context.Background())
	var de *acemq.DrainError
	if !errors.As(err, &de) || de.Stranded != 1 || de.Queue != r.q {
		t.Fatalf("Close = %v, want a *DrainError with 1 stranded", err)
	}
	<-ctxDone
	releaseOnce.Do(func() { close(release) })
	s := r.next()
	if s.Outcome != acemq.OutcomeRequeued || s.Target != "" {
		t.Errorf("the stranded delivery was settled: %+v", s)
	}
	// It went back to the queue when the subscription closed, unchanged,
	// and the handler's late retry republished nothing.
	r.messages(r.q, 1)
	d := r.get(r.q)
	if env := readEnvelope(d); env.Attempt() != 1 || !d.Redelivered {
		t.Errorf("the stranded message came back with attempt %d, redelivered %v", env.Attempt(), d.Redelivered)
	}
}

func testConcurrency(t *testing.T, b backend) {
	r := newRig(t, b)
	const n, total = 4, 24
	var running, peak atomic.Int32
	var mu sync.Mutex
	seen := map[string]bool{}
	consume(r, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		now := running.Add(1)
		defer running.Add(-1)
		for {
			p := peak.Load()
			if now <= p || peak.CompareAndSwap(p, now) {
				break
			}
		}
		// Hold until n handlers have run at once (or give up after a while).
		deadline := time.Now().Add(5 * time.Second)
		for peak.Load() < n && time.Now().Before(deadline) {
			time.Sleep(time.Millisecond)
		}
		mu.Lock()
		seen[m.Payload.ID] = true
		mu.Unlock()
		if id := m.Payload.ID; m.Envelope.Attempt() == 1 && id[len(id)-1]%2 == 0 {
			return acemq.Retry(errTransient)
		}
		return acemq.Accept()
	}, acemq.WithConcurrency(n), acemq.WithPrefetch(8), acemq.WithRetry(retry.Fixed(2, 5*time.Millisecond)))
	for i := range total {
		r.publish(fmt.Sprintf("o-%d", 100+i*7), acemq.Envelope{})
	}
	acked := 0
	deadline := time.Now().Add(waitFor)
	for acked < total {
		if time.Now().After(deadline) {
			t.Fatalf("only %d of %d messages were accepted within %v", acked, total, waitFor)
		}
		s := r.next()
		switch s.Outcome {
		case acemq.OutcomeAcked:
			acked++
		case acemq.OutcomeRetried:
		default:
			t.Fatalf("unexpected settlement %+v", s)
		}
	}
	if p := peak.Load(); p != n {
		t.Errorf("at most %d handlers ran at once, want %d", p, n)
	}
	if len(seen) != total {
		t.Errorf("saw %d distinct messages, want %d", len(seen), total)
	}
	r.messages(r.q, 0)
}

func testOrder(t *testing.T, b backend) {
	r := newRig(t, b)
	var mu sync.Mutex
	var handled []string
	consume(r, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		mu.Lock()
		handled = append(handled, m.Payload.ID)
		mu.Unlock()
		return acemq.Accept()
	})
	var want []string
	for i := range 30 {
		id := fmt.Sprintf("o-%03d", i)
		want = append(want, id)
		r.publish(id, acemq.Envelope{})
	}
	for range want {
		r.next()
	}
	mu.Lock()
	defer mu.Unlock()
	if fmt.Sprint(handled) != fmt.Sprint(want) {
		t.Errorf("handled in order %v, want %v", handled, want)
	}
}

func testUnknownHeaderCarried(t *testing.T, b backend) {
	r := newRig(t, b)
	visible := make(chan map[string]any, 1)
	consume(r, func(_ context.Context, m acemq.Message[order]) acemq.Ack {
		visible <- m.Envelope.Headers()
		return acemq.Reject(errors.New("not today"))
	})
	firstSeen := time.Now().Add(-time.Minute).UnixMilli()
	headers := driver.Table{
		"x-acemq-id":              "6b1c9a5e-0000-4000-8000-000000000001",
		"x-acemq-type":            "order.placed",
		"x-acemq-version":         int32(2),
		"x-acemq-correlation":     "corr-9",
		"x-acemq-attempt":         int32(1),
		"x-acemq-first-seen":      firstSeen,
		"x-acemq-origin":          "orders@host-7",
		"x-acemq-from-the-future": "keep me",
		"x-acemq-future-count":    int32(7),
		"x-tenant":                "acme",
		"acemq-replay-count":      int32(2),
		"traceparent":             "00-0af7651916cd43dd8448eb211c80319c-b7ad6b7169203331-01",
	}
	body := `{"id":"o-40"}`
	r.publishRaw(driver.Message{ContentType: "application/json", MessageID: "6b1c9a5e-0000-4000-8000-000000000001", Headers: headers, Body: []byte(body)})
	h := <-visible
	for k := range h {
		if strings.HasPrefix(k, "x-acemq-") {
			t.Errorf("the handler saw the reserved header %s", k)
		}
	}
	if h["x-tenant"] != "acme" {
		t.Errorf("the handler's headers: %v", h)
	}
	s := r.next()
	checkSettlement(t, s, acemq.DecisionReject, acemq.OutcomeRejected, r.q+".dlq")
	d := r.get(r.q + ".dlq")
	if string(d.Body) != body {
		t.Errorf("body %q", d.Body)
	}
	// Every header it arrived with, unchanged, plus the reason.
	for k, want := range headers {
		got, ok := d.Headers[k]
		if !ok {
			t.Errorf("the dead letter lost %s", k)
			continue
		}
		gn, gInt := asInt64(got)
		wn, wInt := asInt64(want)
		if gInt != wInt || (gInt && gn != wn) || (!gInt && fmt.Sprint(got) != fmt.Sprint(want)) {
			t.Errorf("%s = %#v, want %#v", k, got, want)
		}
	}
	if _, ok := d.Headers["x-acemq-future-count"].(int32); !ok {
		t.Errorf("x-acemq-future-count changed type: %T", d.Headers["x-acemq-future-count"])
	}
	if e, _ := d.Headers["x-acemq-error"].(string); e != "the handler rejected it: Error: not today" {
		t.Errorf("x-acemq-error = %q", e)
	}
}

func testStaleAttempt(t *testing.T, b backend) {
	r := newRig(t, b)
	var calls atomic.Int32
	consume(r, func(context.Context, acemq.Message[order]) acemq.Ack {
		calls.Add(1)
		return acemq.Retry(errTransient)
	}, acemq.WithRetry(retry.Fixed(3, 10*time.Millisecond)))
	env := acemq.MustEnvelope(acemq.Fields{Attempt: 3})
	r.publish("o-50", env)
	s := r.next()
	reason := "exhausted 3 attempts: Error: " + errTransient.Error()
	checkSettlement(t, s, acemq.DecisionRetry, acemq.OutcomeDeadLettered, r.q+".dlq")
	d := r.get(r.q + ".dlq")
	checkSetAside(t, d, env, `{"id":"o-50"}`, reason, 3)
	if n := calls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once", n)
	}
}

func TestConsumeOptionsRefused(t *testing.T) {
	conn := memoryBackend.open(t)
	h := func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Accept() }
	ctx := context.Background()
	for _, c := range []struct {
		name string
		opts []acemq.ConsumeOption
	}{
		{"concurrency 0", []acemq.ConsumeOption{acemq.WithConcurrency(0)}},
		{"negative prefetch", []acemq.ConsumeOption{acemq.WithPrefetch(-1)}},
		{"zero drain", []acemq.ConsumeOption{acemq.WithDrainTimeout(0)}},
		{"nil codec", []acemq.ConsumeOption{acemq.WithCodec(nil)}},
	} {
		if _, err := acemq.Consume(ctx, conn, "q", h, c.opts...); err == nil {
			t.Errorf("%s was accepted", c.name)
		}
	}
	// The source queue is never declared: consuming a missing queue fails
	// before anything is declared (consume_missing_test.go).
	if _, err := acemq.Consume(ctx, conn, "nowhere", h); err == nil || !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("consuming a missing queue: %v", err)
	}
	if _, err := brokertest.Driver(conn).InspectQueue(ctx, "nowhere.dlq"); !errors.Is(err, driver.ErrNotFound) {
		t.Errorf("a consumer that could not start declared its dead-letter half: %v", err)
	}
}

func TestConsumerDefaults(t *testing.T) {
	conn := memoryBackend.open(t)
	ctx := context.Background()
	if err := topology.New().Queue("jobs").Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	c, err := acemq.Consume(ctx, conn, "jobs", func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Accept() })
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if c.Tag() != "acemq-jobs" || c.Queue() != "jobs" || !c.Running() || acemq.Plan(c.Policy()).MaxAttempts != 1 {
		t.Errorf("tag %q queue %q running %v attempts %d", c.Tag(), c.Queue(), c.Running(), acemq.Plan(c.Policy()).MaxAttempts)
	}
	if acemq.DefaultPrefetch != 20 || acemq.DefaultDrainTimeout != 20*time.Second {
		t.Errorf("defaults prefetch %d drain %v", acemq.DefaultPrefetch, acemq.DefaultDrainTimeout)
	}
}

func TestConnCloseStopsConsumers(t *testing.T) {
	conn, err := acemq.Connect(context.Background(), brokertest.MemoryURL(t))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = conn.Close(context.Background()) })
	ctx := context.Background()
	if err := topology.New().Queue("jobs").Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	c, err := acemq.Consume(ctx, conn, "jobs", func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Accept() })
	if err != nil {
		t.Fatal(err)
	}
	if err := conn.Close(ctx); err != nil {
		t.Fatal(err)
	}
	select {
	case <-c.Done():
	case <-time.After(waitFor):
		t.Fatal("closing the connection did not stop its consumer")
	}
	if _, err := acemq.Consume(ctx, conn, "jobs", func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Accept() }); err == nil {
		t.Error("a consumer started on a closed connection")
	}
}

// The settlement hook takes several listeners, each removable. Listeners
// run after the settlement, so the test waits for each call instead of
// counting right after the rig's own listener has seen it.
func TestOnSettleListeners(t *testing.T) {
	r := newRig(t, memoryBackend)
	a, b := make(chan string, 4), make(chan string, 4)
	var (
		orderMu sync.Mutex
		calls   []string
	)
	note := func(who string) {
		orderMu.Lock()
		calls = append(calls, who)
		orderMu.Unlock()
	}
	removeA := r.conn.OnSettle(func(s acemq.Settlement) { note("A"); a <- s.Envelope.ID() })
	removeB := r.conn.OnSettle(func(s acemq.Settlement) { note("B"); b <- s.Envelope.ID() })
	defer removeB()
	wait := func(ch chan string, who string) string {
		t.Helper()
		select {
		case id := <-ch:
			return id
		case <-time.After(waitFor):
			t.Fatalf("listener %s was not called within %v", who, waitFor)
		}
		return ""
	}
	consume(r, func(context.Context, acemq.Message[order]) acemq.Ack { return acemq.Accept() })
	first := r.publish("o-60", acemq.Envelope{})
	r.next()
	if got := wait(a, "A"); got != first.ID() {
		t.Errorf("listener A saw %s, want %s", got, first.ID())
	}
	wait(b, "B")
	removeA()
	second := r.publish("o-61", acemq.Envelope{})
	r.next()
	if got := wait(b, "B"); got != second.ID() {
		t.Errorf("listener B saw %s, want %s", got, second.ID())
	}
	select {
	case id := <-a:
		t.Errorf("listener A was called for %s after it was removed", id)
	case <-time.After(50 * time.Millisecond):
	}
	orderMu.Lock()
	defer orderMu.Unlock()
	if got := strings.Join(calls, ","); got != "A,B,B" {
		t.Errorf("listeners ran in the order %s, want A,B,B (the order registered)", got)
	}
}

// A handler error far longer than a frame (here 200 KB of text) still sets
// its message aside, once: x-acemq-error carries the first part of the
// reason and says how long it was. Uncut, the copy could not be sent, the
// delivery went back to the queue and came straight back, forever on a
// classic queue.
func testHugeErrorIsCut(t *testing.T, b backend) {
	r := newRig(t, b)
	var calls atomic.Int32
	huge := strings.Repeat("é", 100_000) // 200,000 bytes of UTF-8
	consume(r, func(context.Context, acemq.Message[order]) acemq.Ack {
		calls.Add(1)
		return acemq.Reject(errors.New(huge))
	})
	r.publish("o-70", acemq.Envelope{})
	s := r.next()
	checkSettlement(t, s, acemq.DecisionReject, acemq.OutcomeRejected, r.q+".dlq")
	d := r.get(r.q + ".dlq")
	got, _ := d.Headers[acemq.HeaderError].(string)
	if len(got) > contract.MaxErrorHeaderBytes || !utf8.ValidString(got) {
		t.Errorf("x-acemq-error is %d bytes (valid UTF-8: %v), want at most %d", len(got), utf8.ValidString(got), contract.MaxErrorHeaderBytes)
	}
	if !strings.HasPrefix(got, "the handler rejected it: Error: éé") || !strings.Contains(got, fmt.Sprintf("%d bytes", len(s.Reason))) {
		t.Errorf("x-acemq-error = %.80q…%q", got, got[max(0, len(got)-60):])
	}
	if !strings.Contains(s.Reason, huge) {
		t.Error("the settlement's reason was cut too; only the header is")
	}
	if n := calls.Load(); n != 1 {
		t.Errorf("the handler ran %d times, want once", n)
	}
}
