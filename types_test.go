package acemq_test

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/retry"
)

// ConsumeTypes' promises, each run on memory:// and on RabbitMQ.
var typesPaths = []enginePath{
	{"RoutesByType", testTypesRoute},
	{"UnknownTypeDeadLettered", testTypesUnknownDefault},
	{"UnknownTypeUsersChoice", testTypesUnknownChoice},
	{"DecodeFailureInOneType", testTypesDecodeFailure},
	{"RetryThroughRung", testTypesRetry},
}

func TestConsumeTypesMemory(t *testing.T) { runPaths(t, typesPaths, memoryBackend) }

func TestConsumeTypesRabbitMQ(t *testing.T) {
	rabbitBackend.open(t) // skip early when no broker is configured
	runPaths(t, typesPaths, rabbitBackend)
}

type placed struct {
	ID    string `json:"id"`
	Total int    `json:"total"`
}

type cancelled struct {
	ID     string `json:"id"`
	Reason string `json:"reason"`
}

// send publishes body with envelope type typ to the rig's queue.
func (r *rig) send(typ, body string) acemq.Envelope {
	r.t.Helper()
	env := acemq.MustEnvelope(acemq.Fields{Type: typ})
	err := brokertest.Publish(context.Background(), r.conn, brokertest.Outbound{RoutingKey: r.q, Envelope: env, ContentType: "application/json", Body: []byte(body)})
	if err != nil {
		r.t.Fatal(err)
	}
	return env
}

// orderTypes are the handlers of the tests: placed and cancelled orders,
// each sent to its own channel.
func orderTypes(p chan acemq.Message[placed], c chan acemq.Message[cancelled]) []acemq.TypeHandler {
	return []acemq.TypeHandler{
		acemq.HandleType("order.placed", func(_ context.Context, m acemq.Message[placed]) acemq.Ack {
			p <- m
			return acemq.Accept()
		}),
		acemq.HandleType("order.cancelled", func(_ context.Context, m acemq.Message[cancelled]) acemq.Ack {
			c <- m
			return acemq.Accept()
		}),
	}
}

func testTypesRoute(t *testing.T, b backend) {
	r := newRig(t, b)
	p, c := make(chan acemq.Message[placed], 2), make(chan acemq.Message[cancelled], 2)
	r.track(acemq.ConsumeTypes(context.Background(), r.conn, r.q, orderTypes(p, c)))
	pe := r.send("order.placed", `{"id":"o-1","total":12}`)
	ce := r.send("order.cancelled", `{"id":"o-1","reason":"changed my mind"}`)
	mp, mc := brokertest.Receive(t, p), brokertest.Receive(t, c)
	if mp.Payload != (placed{"o-1", 12}) || mp.Envelope.ID() != pe.ID() || mp.Queue != r.q {
		t.Errorf("the placed handler saw %+v", mp)
	}
	if mc.Payload != (cancelled{"o-1", "changed my mind"}) || mc.Envelope.ID() != ce.ID() {
		t.Errorf("the cancelled handler saw %+v", mc)
	}
	for range 2 {
		checkSettlement(t, r.next(), acemq.DecisionAccept, acemq.OutcomeAcked, "")
	}
	if len(p)+len(c) != 0 {
		t.Errorf("a handler saw a message twice")
	}
}

func testTypesUnknownDefault(t *testing.T, b backend) {
	r := newRig(t, b)
	p, c := make(chan acemq.Message[placed], 1), make(chan acemq.Message[cancelled], 1)
	// A retry policy with attempts left: the default still dead-letters at
	// once, since retrying cannot give the type a handler.
	r.track(acemq.ConsumeTypes(context.Background(), r.conn, r.q, orderTypes(p, c),
		acemq.WithRetry(retry.Fixed(3, 10*time.Millisecond))))
	env := r.send("order.shipped", `{"id":"o-2"}`)
	s := r.next()
	checkSettlement(t, s, acemq.DecisionReject, acemq.OutcomeRejected, r.q+".dlq")
	reason := `the handler reported an unprocessable message: Error: acemq: no handler is registered for type "order.shipped" (registered: "order.cancelled", "order.placed")`
	checkSetAside(t, r.get(r.q+".dlq"), env, `{"id":"o-2"}`, reason, 1)
	if len(p)+len(c) != 0 {
		t.Errorf("a registered handler saw the unknown type")
	}
}

func testTypesUnknownChoice(t *testing.T, b backend) {
	r := newRig(t, b)
	p, c := make(chan acemq.Message[placed], 1), make(chan acemq.Message[cancelled], 1)
	unknown := make(chan acemq.Message[[]byte], 2)
	r.track(acemq.ConsumeTypes(context.Background(), r.conn, r.q, orderTypes(p, c),
		acemq.WithUnknownType(func(_ context.Context, m acemq.Message[[]byte]) acemq.Ack {
			unknown <- m
			if m.Envelope.Type() == "order.shipped" {
				return acemq.Accept() // not ours: drop it
			}
			return acemq.Park(errNotOurs)
		})))
	r.send("order.shipped", `{"id":"o-3"}`)
	m := brokertest.Receive(t, unknown)
	if string(m.Payload) != `{"id":"o-3"}` || string(m.Body) != `{"id":"o-3"}` {
		t.Errorf("the unknown-type handler saw payload %q body %q, want the raw body", m.Payload, m.Body)
	}
	checkSettlement(t, r.next(), acemq.DecisionAccept, acemq.OutcomeAcked, "")
	env := r.send("order.refunded", `{"id":"o-4"}`)
	brokertest.Receive(t, unknown)
	checkSettlement(t, r.next(), acemq.DecisionPark, acemq.OutcomeParked, r.q+".parked")
	checkSetAside(t, r.get(r.q+".parked"), env, `{"id":"o-4"}`, "the handler parked it: Error: "+errNotOurs.Error(), 1)
	r.messages(r.q+".dlq", 0)
}

var errNotOurs = errors.New("not a type this service handles")

func testTypesDecodeFailure(t *testing.T, b backend) {
	r := newRig(t, b)
	p, c := make(chan acemq.Message[placed], 1), make(chan acemq.Message[cancelled], 1)
	r.track(acemq.ConsumeTypes(context.Background(), r.conn, r.q, orderTypes(p, c)))
	// A total that is not a number: placed cannot read it, and nothing
	// else is affected.
	bad := acemq.MustEnvelope(acemq.Fields{Type: "order.placed"})
	r.publishRaw(driver.Message{ContentType: "application/json", MessageID: bad.ID(), Headers: bad.AppendHeaders(nil, r.q), Body: []byte(`{"id":"o-5","total":"twelve"}`)})
	s := r.next()
	checkSettlement(t, s, acemq.DecisionPark, acemq.OutcomeParked, r.q+".parked")
	if !strings.HasPrefix(s.Reason, "could not be decoded: UnmarshalTypeError: ") {
		t.Errorf("reason %q", s.Reason)
	}
	if got := r.get(r.q + ".parked"); readEnvelope(got).ID() != bad.ID() {
		t.Errorf("parked %q, want %q", readEnvelope(got).ID(), bad.ID())
	}
	r.send("order.cancelled", `{"id":"o-5","reason":"typo"}`)
	if m := brokertest.Receive(t, c); m.Payload.ID != "o-5" {
		t.Errorf("the cancelled handler saw %+v", m)
	}
	checkSettlement(t, r.next(), acemq.DecisionAccept, acemq.OutcomeAcked, "")
	if len(p) != 0 {
		t.Errorf("the placed handler saw the undecodable body")
	}
}

func testTypesRetry(t *testing.T, b backend) {
	r := newRig(t, b)
	attempts := make(chan int, 2)
	r.track(acemq.ConsumeTypes(context.Background(), r.conn, r.q, []acemq.TypeHandler{
		acemq.HandleType("order.placed", func(_ context.Context, m acemq.Message[placed]) acemq.Ack {
			attempts <- m.Envelope.Attempt()
			if m.Envelope.Attempt() == 1 {
				return acemq.Retry(errTransient)
			}
			return acemq.Accept()
		}),
	}, acemq.WithRetry(retry.Fixed(2, time.Second).WaitInBrokerFrom(time.Second))))
	rung := r.q + ".retry.1s"
	env := r.send("order.placed", `{"id":"o-6","total":1}`)
	s := r.next()
	checkSettlement(t, s, acemq.DecisionRetry, acemq.OutcomeRetried, rung)
	if s.Where != acemq.WhereBroker {
		t.Errorf("the retry waited in %q, want the broker's rung", s.Where)
	}
	if a, b := brokertest.Receive(t, attempts), brokertest.Receive(t, attempts); a != 1 || b != 2 {
		t.Errorf("attempts %d then %d", a, b)
	}
	s = r.next()
	checkSettlement(t, s, acemq.DecisionAccept, acemq.OutcomeAcked, "")
	if s.Envelope.ID() != env.ID() || s.Envelope.Type() != "order.placed" {
		t.Errorf("accepted %s of type %q", s.Envelope.ID(), s.Envelope.Type())
	}
}

func TestConsumeTypesRefuses(t *testing.T) {
	conn := memoryBackend.open(t)
	q := testenv.Unique(t, "acemq-types")
	ok := func(context.Context, acemq.Message[placed]) acemq.Ack { return acemq.Accept() }
	for _, tc := range []struct {
		name     string
		handlers []acemq.TypeHandler
		opts     []acemq.ConsumeOption
		want     string
	}{
		{"none", nil, nil, "acemq: ConsumeTypes needs at least one handler made by HandleType"},
		{"empty type", []acemq.TypeHandler{acemq.HandleType("", ok)}, nil, "acemq: ConsumeTypes: handler 1 was registered for an empty type"},
		{"nil handler", []acemq.TypeHandler{acemq.HandleType[placed]("a", nil)}, nil, `acemq: ConsumeTypes: the handler of type "a" is nil`},
		{"twice", []acemq.TypeHandler{acemq.HandleType("a", ok), acemq.HandleType("a", ok)}, nil, `acemq: ConsumeTypes: type "a" is registered twice`},
		{"middleware", []acemq.TypeHandler{acemq.HandleType("a", ok)}, []acemq.ConsumeOption{acemq.WithMiddleware(func(h acemq.Handler[placed]) acemq.Handler[placed] { return h })}, "acemq: ConsumeTypes takes no WithMiddleware"},
		{"unknown nil", []acemq.TypeHandler{acemq.HandleType("a", ok)}, []acemq.ConsumeOption{acemq.WithUnknownType(nil)}, "acemq: WithUnknownType(nil)"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			c, err := acemq.ConsumeTypes(context.Background(), conn, q, tc.handlers, tc.opts...)
			if err == nil || !strings.HasPrefix(err.Error(), tc.want) {
				t.Errorf("err %v, want %q", err, tc.want)
			}
			if c != nil {
				_ = c.Close(context.Background())
			}
		})
	}
	_, err := acemq.Consume(context.Background(), conn, q, ok, acemq.WithUnknownType(func(context.Context, acemq.Message[[]byte]) acemq.Ack { return acemq.Accept() }))
	if err == nil || !strings.Contains(err.Error(), "WithUnknownType is for ConsumeTypes, not Consume") {
		t.Errorf("Consume with WithUnknownType: %v", err)
	}
}
