package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/topology"
)

// FuzzEngineSettlesAnything feeds deliveries with arbitrary envelope header
// values and bodies through a consumer whose handler always asks for a
// retry, under the default policy. Whatever arrives, the engine must settle
// it exactly once — dead-lettered when the body decodes, parked when it does
// not — and the set-aside copy must carry the original bytes and the unknown
// reserved header unchanged.
func FuzzEngineSettlesAnything(f *testing.F) {
	f.Add("1", int64(1767323045678), "v", []byte(`{"id":"o-1"}`), "application/json")
	f.Add("", int64(0), "", []byte(``), "")
	f.Add("-7", int64(-1), "x", []byte(`{"id":`), "application/json")
	f.Add("99999999999999999999", int64(1<<62), "\xff\xfe", []byte("\x00\x01"), "text/plain")
	f.Add(" 3 ", int64(32503680000000), "ünïcode", []byte(`"just a string"`), "application/vnd.x+json; charset=utf-8")

	name := "fuzz-engine-" + randomHex(4)
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, "memory://"+name)
	if err != nil {
		f.Fatal(err)
	}
	defer memory.Reset(name)
	defer conn.Close(ctx)
	const q = "fuzz"
	if err := topology.New().Queue(q, topology.WithDeadLettering(true)).Apply(ctx, conn); err != nil {
		f.Fatal(err)
	}
	settled := make(chan acemq.Settlement, 16)
	conn.OnSettle(func(s acemq.Settlement) { settled <- s })
	c, err := acemq.Consume(ctx, conn, q, func(context.Context, acemq.Message[order]) acemq.Ack {
		return acemq.Retry(errors.New("try again"))
	})
	if err != nil {
		f.Fatal(err)
	}
	defer c.Close(ctx)
	tr := brokertest.Driver(conn)

	f.Fuzz(func(t *testing.T, attempt string, firstSeen int64, unknown string, body []byte, contentType string) {
		headers := driver.Table{
			"x-acemq-attempt":    attempt,
			"x-acemq-first-seen": firstSeen,
			"x-acemq-fuzz":       unknown,
			"x-acemq-id":         "fuzz-id",
		}
		if err := tr.Publish(ctx, driver.Message{RoutingKey: q, Mandatory: true, ContentType: contentType, Headers: headers, Body: body}); err != nil {
			t.Fatal(err)
		}
		var s acemq.Settlement
		select {
		case s = <-settled:
		case <-time.After(10 * time.Second):
			t.Fatal("no settlement")
		}
		var target string
		switch s.Outcome {
		case acemq.OutcomeDeadLettered:
			target = q + ".dlq"
			if !strings.HasPrefix(s.Reason, "exhausted 1 attempts: ") {
				t.Errorf("reason %q", s.Reason)
			}
		case acemq.OutcomeParked:
			target = q + ".parked"
			if !strings.HasPrefix(s.Reason, "could not be decoded: ") {
				t.Errorf("reason %q", s.Reason)
			}
		default:
			t.Fatalf("outcome %q (%+v)", s.Outcome, s)
		}
		d, ok, err := tr.Get(ctx, target)
		if err != nil || !ok {
			t.Fatalf("nothing in %s: %v", target, err)
		}
		_ = d.Ack()
		if string(d.Body) != string(body) || d.ContentType != contentType {
			t.Errorf("the copy changed the body or content type: %q %q", d.Body, d.ContentType)
		}
		if got, _ := d.Headers["x-acemq-fuzz"].(string); got != unknown {
			t.Errorf("x-acemq-fuzz = %q, want %q", got, unknown)
		}
		env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
		if env.ID() != "fuzz-id" {
			t.Errorf("the copy reads id %q", env.ID())
		}
		// x-acemq-error is the settlement's reason, cut to
		// contract.MaxErrorHeaderBytes when it is longer.
		if len(s.Reason) <= contract.MaxErrorHeaderBytes {
			if env.Reason() != s.Reason {
				t.Errorf("the copy reads error %q, want %q", env.Reason(), s.Reason)
			}
		} else if mark := fmt.Sprintf("… (cut; the reason was %d bytes)", len(s.Reason)); len(env.Reason()) > contract.MaxErrorHeaderBytes ||
			!strings.HasSuffix(env.Reason(), mark) || !strings.HasPrefix(s.Reason, strings.TrimSuffix(env.Reason(), mark)) {
			t.Errorf("the copy's error is not the reason cut: %d bytes, ends %q", len(env.Reason()), env.Reason()[max(0, len(env.Reason())-60):])
		}
		select {
		case extra := <-settled:
			t.Errorf("a second settlement: %+v", extra)
		default:
		}
	})
}
