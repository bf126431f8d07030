package reliability

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math"
	"os"
	"os/exec"
	"path/filepath"
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
	"github.com/acemq/acemq/rabbitmq"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/topology"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Scenario 6: deliveries with hostile headers and bodies, published raw
// (brokertest.Driver(conn).Publish, bypassing the envelope writer), are either
// handled or set aside with a reason, and the consumer keeps going: a good
// message published after them is still processed. The same messages, read
// by the CLI, do not crash it either.
//
// The header decoding, body framings and routing slips are fuzzed where they
// are parsed: FuzzReadEnvelope (package acemq), FuzzWireInt and
// FuzzWireString (internal/wire), FuzzDecode (claimcheck), FuzzParseSlip
// (route), FuzzTraceHeaders (package acemq), FuzzReply (rpc) and
// FuzzEnvelopeDecode (cmd/acemq).

// reservedNames is every x-acemq-* header the envelope knows, an unknown
// one (carried through unchanged) and a known one in another letter case.
var reservedNames = []string{
	wire.HeaderID, wire.HeaderType, wire.HeaderVersion, wire.HeaderCorrelation,
	wire.HeaderCausation, wire.HeaderAttempt, wire.HeaderFirstSeen, wire.HeaderOrigin,
	wire.HeaderError, wire.HeaderClaim, wire.HeaderRoute, wire.HeaderRoutePosition,
	wire.HeaderRouteID, "x-acemq-from-the-future", "X-ACEMQ-ATTEMPT",
}

type namedValue struct {
	name  string
	value any
}

// hostileValues are values of every wrong type and range. huge is the size
// of the largest string value; nonFinite adds NaN and -Inf, which RabbitMQ
// cannot carry (see TestUnsendableRefused).
func hostileValues(huge int, nonFinite bool) []namedValue {
	vs := []namedValue{
		{"bool", true},
		{"float", 1.5},
		{"whole-float", float64(3)},
		{"float32", float32(1e38)},
		{"table", driver.Table{"nested": driver.Table{"deeper": int32(1)}, "s": "x"}},
		{"array", []any{"a", int32(2), driver.Table{"x": true}, []any{}}},
		{"x-death-like-array", []any{driver.Table{"count": int64(9), "queue": "q", "reason": "expired"}}},
		{"decimal", driver.Decimal{Scale: 2, Value: -12345}},
		{"timestamp", time.Unix(1700000000, 0).UTC()},
		{"negative", int32(-5)},
		{"min-int64", int64(math.MinInt64)},
		{"max-int64", int64(math.MaxInt64)},
		{"max-uint32", uint32(math.MaxUint32)},
		{"int8", int8(-128)},
		{"uint8", uint8(255)},
		{"int16", int16(-32768)},
		{"uint16", uint16(65535)},
		{"digits-overflow", "99999999999999999999999"},
		{"negative-string", "-7"},
		{"invalid-utf8", "\xff\xfe\xfd"},
		{"invalid-utf8-bytes", []byte{0xc3, 0x28}},
		{"bytes", []byte("2")},
		{"empty", ""},
		{"void", nil},
		{"huge", strings.Repeat("h", huge)},
	}
	if nonFinite {
		vs = append(vs, namedValue{"nan", math.NaN()}, namedValue{"-inf", math.Inf(-1)}, namedValue{"+inf32", float32(math.Inf(1))})
	}
	return vs
}

// hostileCase is one raw message.
type hostileCase struct {
	name        string
	headers     driver.Table
	contentType string
	body        []byte
	badBody     bool // the body cannot be decoded into a payload
}

// deep nests v in n tables (or arrays).
func deep(n int, array bool) any {
	var v any = "bottom"
	for range n {
		if array {
			v = []any{v}
		} else {
			v = driver.Table{"d": v}
		}
	}
	return v
}

// hostileCases is the hostile set. On RabbitMQ (rabbit true) it leaves out
// what the broker or the client cannot carry: non-finite floats, and
// nesting deeper than amqp091's 32 levels.
func hostileCases(huge int, rabbit bool) []hostileCase {
	depth := 64
	if rabbit {
		depth = 30
	}
	var cs []hostileCase
	for _, name := range reservedNames {
		for _, v := range hostileValues(huge, !rabbit) {
			cs = append(cs, hostileCase{name: name + "=" + v.name, headers: driver.Table{name: v.value}})
		}
	}
	many := driver.Table{}
	for i := range 2000 {
		many[fmt.Sprintf("h%04d", i)] = int32(i)
	}
	apps := []namedValue{
		{"x-death-garbage", driver.Table{"x-death": []any{"not a table", int32(1), nil}}},
		{"x-death-wrong-fields", driver.Table{"x-death": []any{driver.Table{"count": "many", "queue": int32(5), "reason": driver.Table{}, "time": "yesterday"}}}},
		{"x-death-string", driver.Table{"x-death": "died"}},
		{"x-first-death-queue-table", driver.Table{"x-first-death-queue": driver.Table{}}},
		{"deep-tables", driver.Table{"deep": deep(depth, false)}},
		{"deep-arrays", driver.Table{"deep": deep(depth, true)}},
		{"many-headers", many},
		{"huge-app-header", driver.Table{"big": strings.Repeat("b", huge)}},
		{"invalid-utf8-name", driver.Table{"\xff\xfe": "v"}},
		{"traceparent-table", driver.Table{"traceparent": driver.Table{"a": int32(1)}}},
		{"traceparent-garbage", driver.Table{"traceparent": "00-zzzz-yyyy-01", "tracestate": strings.Repeat("k=v,", 5000)}},
		{"traceparent-invalid-utf8", driver.Table{"traceparent": "\xff", "baggage": []any{int32(1)}}},
		{"reply-to-table", driver.Table{wire.HeaderReplyTo: driver.Table{}, wire.HeaderRoutingSlip: true}},
		{"routing-slip-garbage", driver.Table{wire.HeaderRoutingSlip: "{not json", wire.HeaderReplayCount: "x"}},
	}
	for _, a := range apps {
		cs = append(cs, hostileCase{name: a.name, headers: a.value.(driver.Table)})
	}
	// Body framings the JSON codec cannot read: set aside as undecodable.
	bodies := []struct {
		name, ct string
		body     []byte
	}{
		{"truncated-json", "application/json", []byte(`{"seq":`)},
		{"empty-body", "application/json", nil},
		{"invalid-utf8-body", "application/json", []byte{0xff, 0xfe, 0xfd}},
		{"wrong-shape", "application/json", []byte(`{"seq":"seven"}`)},
		{"too-deep", "application/json", []byte(strings.Repeat("[", 20000) + strings.Repeat("]", 20000))},
		{"foreign-content-type", "application/x-protobuf", []byte{0x08, 0x96, 0x01}},
		{"content-type-garbage", "\xff;;;===", []byte(`{"seq":1}`)},
	}
	for _, b := range bodies {
		cs = append(cs, hostileCase{name: b.name, contentType: b.ct, body: b.body, badBody: true,
			headers: driver.Table{"x-death": []any{"garbage"}, wire.HeaderAttempt: "nope"}})
	}
	return cs
}

// TestHostileDeliveries runs the hostile set on the memory broker (with
// 1 MB values) and on RabbitMQ (where a message's properties and headers
// must fit in one frame, 128 KiB by default, so the huge values are 40 KiB:
// a copy set aside carries the id twice, as id and correlation).
func TestHostileDeliveries(t *testing.T) {
	t.Run("memory", func(t *testing.T) { hostile(t, brokertest.MemoryURL(t), 1<<20, false) })
	t.Run("rabbitmq", func(t *testing.T) { hostile(t, testenv.AMQPURL(t), 40<<10, true) })
}

// hostilePolicy retries once, in the consumer.
var hostilePolicy = retry.Fixed(2, 10*time.Millisecond)

func hostile(t *testing.T, url string, huge int, rabbit bool) {
	start := time.Now()
	q := uniqueName("hostile")
	raw := q + ".raw"
	deleteQueuesAtCleanup(t, url, q, raw, contract.DeadLetterQueue(q), contract.ParkedQueue(q), contract.DeadLetterQueue(raw), contract.ParkedQueue(raw))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	tp := sdktrace.NewTracerProvider()
	t.Cleanup(func() { _ = tp.Shutdown(context.Background()) })
	var lost []string
	var lmu sync.Mutex
	c := connect(t, url, "acemq-reliability-hostile", acemq.WithTracerProvider(tp), acemq.WithOnConnEvent(func(e driver.Event) {
		if e.Kind == driver.EventLost {
			lmu.Lock()
			lost = append(lost, fmt.Sprint(e.Err))
			lmu.Unlock()
		}
	}))
	if err := topology.New().Queue(q).Queue(raw).Apply(ctx, c); err != nil {
		t.Fatal(err)
	}

	cases := hostileCases(huge, rabbit)
	var (
		mu       sync.Mutex
		handled  = map[int][]int{} // seq → attempts seen
		finals   = map[acemq.Outcome]int{}
		reasons  = map[acemq.Outcome]int{}
		requeued []acemq.Settlement
	)
	c.OnSettle(func(s acemq.Settlement) {
		mu.Lock()
		defer mu.Unlock()
		if s.Outcome == acemq.OutcomeRequeued || s.SettleErr != nil {
			requeued = append(requeued, s)
		}
		if s.Outcome != acemq.OutcomeRetried {
			finals[s.Outcome]++
		}
		if s.Reason != "" {
			reasons[s.Outcome]++
		}
	})
	consumer, err := acemq.Consume(ctx, c, q, func(_ context.Context, m acemq.Message[payload]) acemq.Ack {
		seq := m.Payload.Seq
		mu.Lock()
		handled[seq] = append(handled[seq], m.Envelope.Attempt())
		mu.Unlock()
		// Touch everything a handler might read.
		_ = m.Envelope.Headers()
		_, _ = m.Envelope.Age()
		_ = m.Envelope.Fields().Route
		_ = m.Envelope.AppendHeaders(nil, q)
		_ = m.Envelope.String()
		_ = m.Envelope.Fields()
		switch seq % 3 {
		case 1:
			if m.Envelope.Attempt() == 1 {
				return acemq.Retry(errors.New("the first attempt fails on purpose"))
			}
		case 2:
			return acemq.Park(errors.New("parked by the handler on purpose"))
		}
		return acemq.Accept()
	}, acemq.WithRetry(hostilePolicy), acemq.WithConcurrency(4))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = consumer.Close(context.Background()) }()

	// Publish every case raw, to the consumer's queue and to a queue the
	// CLI reads, then one good message.
	published, refused := 0, 0
	for i, hc := range cases {
		body, ct := hc.body, hc.contentType
		if !hc.badBody {
			body, ct = fmt.Appendf(nil, `{"seq":%d}`, i+1), "application/json"
		}
		for _, target := range []string{q, raw} {
			m := driver.Message{RoutingKey: target, Mandatory: true, MessageID: fmt.Sprintf("hostile-%d", i+1),
				ContentType: ct, Headers: hc.headers, Body: body}
			if err := brokertest.Driver(c).Publish(ctx, m); err != nil {
				t.Errorf("publishing %s raw: %v", hc.name, err)
				refused++
				continue
			}
			if target == q {
				published++
			}
		}
	}
	good := len(cases) + 3 // seq%3 == 0: accepted at once
	if _, err := acemq.NewPublisher[payload](c, "").Send(ctx, q, payload{Seq: good}); err != nil {
		t.Fatal(err)
	}
	published++

	// Every message settled for good (acked, parked or dead-lettered).
	poll(t, "every hostile message to be settled", 90*time.Second, func() bool {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for _, k := range finals {
			n += k
		}
		return n >= published || len(requeued) > 0
	})
	if !consumer.Running() {
		t.Errorf("the consumer stopped")
	}
	mu.Lock()
	defer mu.Unlock()
	if len(requeued) > 0 {
		t.Errorf("%d settlements could not be carried out (the message was put back): first %+v", len(requeued), requeued[0])
	}
	if len(handled[good]) == 0 {
		t.Errorf("the good message published after the hostile ones was not processed")
	}
	badBodies := 0
	for i, hc := range cases {
		if hc.badBody {
			badBodies++
			continue
		}
		if len(handled[i+1]) == 0 {
			t.Errorf("%s: the handler never saw it", hc.name)
		}
	}
	if finals[acemq.OutcomeParked] < badBodies {
		t.Errorf("%d parked, want at least the %d undecodable bodies", finals[acemq.OutcomeParked], badBodies)
	}
	setAside := finals[acemq.OutcomeParked] + finals[acemq.OutcomeDeadLettered] + finals[acemq.OutcomeRejected]
	if reasons[acemq.OutcomeParked]+reasons[acemq.OutcomeDeadLettered]+reasons[acemq.OutcomeRejected] != setAside {
		t.Errorf("some messages were set aside without a reason: %v of %d", reasons, setAside)
	}
	// What was set aside is on the broker, each with x-acemq-error.
	onBroker := 0
	for _, side := range []string{contract.ParkedQueue(q), contract.DeadLetterQueue(q)} {
		for {
			d, ok, err := brokertest.Driver(c).Get(ctx, side)
			if err != nil {
				t.Fatal(err)
			}
			if !ok {
				break
			}
			_ = d.Ack()
			onBroker++
			if env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID); env.Reason() == "" {
				t.Errorf("%s holds %s without a reason", side, d.MessageID)
			}
		}
	}
	if onBroker != setAside {
		t.Errorf("%d messages set aside on the broker, want %d", onBroker, setAside)
	}
	lmu.Lock()
	if len(lost) > 0 {
		t.Errorf("the connection was lost %d times: %q", len(lost), lost)
	}
	lmu.Unlock()

	cliLines := "n/a"
	if rabbit {
		cliLines = fmt.Sprint(cliReads(t, url, raw, len(cases)))
	}
	scheme, _, _ := strings.Cut(url, ":")
	newFigures("hostile-"+scheme).
		add("sent", published).add("confirmed", published).add("refused", refused).
		add("delivered", finals[acemq.OutcomeAcked]+setAside).add("lost", published-finals[acemq.OutcomeAcked]-setAside).
		add("duplicated", 0).add("acked", finals[acemq.OutcomeAcked]).add("parked", finals[acemq.OutcomeParked]).
		add("dead_lettered", finals[acemq.OutcomeDeadLettered]).add("undecodable", badBodies).
		add("huge_bytes", huge).add("cli_read", cliLines).add("time", time.Since(start)).log(t)
}

// cliReads runs `acemq consume --json` over queue, which holds n hostile
// messages, and checks that it reads every one and exits 0.
func cliReads(t *testing.T, url, queue string, n int) int {
	t.Helper()
	goTool, err := exec.LookPath("go")
	if err != nil {
		if testenv.InCI() {
			t.Fatalf("building the CLI needs the go tool: %v", err)
		}
		t.Logf("not checking the CLI: %v", err)
		return -1
	}
	bin := filepath.Join(t.TempDir(), "acemq")
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	build := exec.CommandContext(ctx, goTool, "build", "-o", bin, "./cmd/acemq")
	build.Dir = testenv.Root()
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("building the CLI: %v\n%s", err, out)
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.CommandContext(ctx, bin, "consume", "--url", url, "--queue", queue, "--json")
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	cmd.Env = append(os.Environ(), "ACEMQ_URL=")
	if err := cmd.Run(); err != nil {
		t.Fatalf("acemq consume over hostile messages: %v\n%s", err, tail(stderr.String()))
	}
	lines := 0
	sc := bufio.NewScanner(&stdout)
	sc.Buffer(nil, 64<<20)
	for sc.Scan() {
		if !json.Valid(sc.Bytes()) {
			t.Errorf("acemq consume --json printed a line that is not JSON: %.200q", sc.Text())
		}
		lines++
	}
	if lines != n {
		t.Errorf("acemq consume --json printed %d lines for %d messages\n%s", lines, n, tail(stderr.String()))
	}
	return lines
}

func tail(s string) string {
	if len(s) > 2000 {
		return "…" + s[len(s)-2000:]
	}
	return s
}

// TestUnsendableRefused: a message that RabbitMQ or its client cannot carry
// is refused by the driver before anything is sent, with an error saying
// why, and costs nobody anything. Sent as it is, each of these closes the
// connection: RabbitMQ answers a non-finite float with INTERNAL_ERROR, a
// property longer than 255 bytes or a header block larger than a frame
// with a frame error, and amqp091 closes the connection of every consumer
// that receives nesting deeper than 32 levels or a table of more than 8192
// entries, again on every redelivery.
func TestUnsendableRefused(t *testing.T) {
	url := testenv.AMQPURL(t)
	start := time.Now()
	q := uniqueName("unsendable")
	deleteQueuesAtCleanup(t, url, q)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var lost atomic.Int64
	c := connect(t, url, "acemq-reliability-unsendable", acemq.WithOnConnEvent(func(e driver.Event) {
		if e.Kind == driver.EventLost {
			lost.Add(1)
			t.Logf("connection lost: %v", e.Err)
		}
	}))
	if _, err := brokertest.Driver(c).DeclareQueue(ctx, driver.Queue{Name: q}); err != nil {
		t.Fatal(err)
	}
	sub, err := brokertest.Driver(c).Consume(ctx, driver.ConsumeSpec{Queue: q})
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = sub.Close() }()
	wide := driver.Table{}
	for i := range 9000 {
		wide[fmt.Sprintf("w%04d", i)] = true
	}
	long := strings.Repeat("n", 300)
	cases := []struct {
		name string
		m    driver.Message
	}{
		{"nan", driver.Message{Headers: driver.Table{"f": math.NaN()}}},
		{"+inf32", driver.Message{Headers: driver.Table{"f": float32(math.Inf(1))}}},
		{"-inf-nested", driver.Message{Headers: driver.Table{"t": driver.Table{"a": []any{math.Inf(-1)}}}}},
		{"tables-40-deep", driver.Message{Headers: driver.Table{"deep": deep(40, false)}}},
		{"arrays-40-deep", driver.Message{Headers: driver.Table{"deep": deep(40, true)}}},
		{"9000-headers", driver.Message{Headers: wide}},
		{"9000-nested-entries", driver.Message{Headers: driver.Table{"t": wide}}},
		{"300-byte-header-name", driver.Message{Headers: driver.Table{long: "v"}}},
		{"300-byte-message-id", driver.Message{MessageID: long}},
		{"300-byte-content-type", driver.Message{ContentType: long}},
		{"1MB-header", driver.Message{Headers: driver.Table{"big": strings.Repeat("b", 1<<20)}}},
		{"frame-plus-one", driver.Message{Headers: driver.Table{"big": strings.Repeat("b", 131072-42)}}},
		// Exactly one frame: sent and received.
		{"frame-exact", driver.Message{Headers: driver.Table{"big": strings.Repeat("b", 131072-43)}}},
		// The same two with the size given, as acemq's publishers give it
		// (driver.Message.HeaderSize): the driver trusts it and checks the
		// frame all the same.
		{"frame-plus-one-sized", sized(driver.Table{"big": strings.Repeat("b", 131072-42)})},
		{"frame-exact-sized", sized(driver.Table{"big": strings.Repeat("b", 131072-43)})},
	}
	for i, tc := range cases {
		m := tc.m
		m.RoutingKey, m.Mandatory = q, true
		if m.MessageID == "" {
			m.MessageID = fmt.Sprintf("bad-%d", i)
		}
		// A good publish in flight alongside must not be hurt.
		good := make(chan error, 1)
		go func() {
			good <- brokertest.Driver(c).Publish(ctx, driver.Message{RoutingKey: q, Mandatory: true, MessageID: fmt.Sprintf("good-%d", i), Body: []byte("ok")})
		}()
		err := brokertest.Driver(c).Publish(ctx, m)
		exact := strings.HasPrefix(tc.name, "frame-exact")
		switch {
		case exact && err != nil:
			t.Errorf("%s: %v; a message whose headers fill one frame exactly can be sent", tc.name, err)
		case exact:
		case err == nil:
			t.Errorf("%s: published; want it refused", tc.name)
		case errors.Is(err, driver.ErrLost):
			t.Errorf("%s: %v; want it refused before sending, not the connection lost", tc.name, err)
		case !errors.Is(err, rabbitmq.ErrUnsendable):
			t.Errorf("%s: %v; want an error wrapping rabbitmq.ErrUnsendable", tc.name, err)
		default:
			t.Logf("%s: %.200s", tc.name, err)
		}
		if err := <-good; err != nil {
			t.Errorf("%s: a good publish alongside failed: %v", tc.name, err)
		}
		want := map[string]bool{fmt.Sprintf("good-%d", i): true}
		if exact {
			want[m.MessageID] = true
		}
		for len(want) > 0 {
			select {
			case d := <-sub.Deliveries():
				if !want[d.MessageID] {
					t.Errorf("%s: received %q", tc.name, d.MessageID)
				}
				delete(want, d.MessageID)
				_ = d.Ack()
			case <-time.After(30 * time.Second):
				t.Fatalf("%s: %v not received", tc.name, want)
			}
		}
	}
	if n := lost.Load(); n > 0 {
		t.Errorf("the connection was lost %d times", n)
	}
	newFigures("unsendable-amqp").add("sent", len(cases)).add("refused", len(cases)-1).
		add("good_alongside", len(cases)).add("conn_lost", lost.Load()).add("time", time.Since(start)).log(t)
}

// sized is a message with headers h, a table of one string header, and
// their encoded size in HeaderSize: the length prefix, the name's length
// octet and bytes, the type octet, the string's length and bytes.
func sized(h driver.Table) driver.Message {
	n := 4
	for k, v := range h {
		n += 1 + len(k) + 1 + 4 + len(v.(string))
	}
	return driver.Message{Headers: h, HeaderSize: n}
}
