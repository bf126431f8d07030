package demo

import (
	"bytes"
	"context"
	"crypto/sha256"
	"errors"
	"fmt"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/claimcheck"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/cli/reasons"
	"github.com/acemq/acemq/replay"
	"github.com/acemq/acemq/route"
	"github.com/acemq/acemq/rpc"
	"github.com/acemq/acemq/topology"
)

// quote is the pricing service's answer.
type quote struct {
	SKU   string `json:"sku"`
	Pence int    `json:"pence"`
}

// pricingStep asks a pricing service for prices by request/reply: two SKUs
// it knows are answered, an unknown one comes back at once as the
// responder's error rather than at the deadline.
func (d *demo) pricingStep(ctx context.Context) {
	const promise = "answer 2 price requests; an unknown SKU fails at once with the responder's error"
	d.say("step 2: pricing — %s", promise)
	q := "acemq-demo-" + d.sfx + ".pricing"
	if err := d.declareQueue(ctx, q); err != nil {
		d.step("pricing", promise, err, "")
		return
	}
	prices := map[string]int{"A-1": 250, "B-7": 1299}
	resp, err := rpc.Serve(ctx, d.conn, q, func(ctx context.Context, m acemq.Message[string]) (quote, error) {
		d.narrate("request", m.Payload, m.Envelope)
		p, ok := prices[m.Payload]
		if !ok {
			return quote{}, &reasons.UnknownSKUError{SKU: m.Payload}
		}
		return quote{SKU: m.Payload, Pence: p}, nil
	}, acemq.WithDrainTimeout(5*time.Second))
	if err != nil {
		d.step("pricing", promise, err, "")
		return
	}
	d.closeAtEnd(resp.Close)
	ask, err := rpc.Open[string, quote](ctx, d.conn, "", q, rpc.WithTimeout(10*time.Second))
	if err != nil {
		d.step("pricing", promise, err, "")
		return
	}
	d.closeAtEnd(ask.Close)
	d.say("  requester replies on %s (exclusive, auto-delete)", ask.ReplyQueue())

	answered, err := d.askPrices(ctx, ask, prices)
	if err != nil {
		d.step("pricing", promise, err, "")
		return
	}
	start := time.Now()
	_, err = ask.Ask(ctx, "Z-0", priceRequest())
	var re *rpc.ResponderError
	if !errors.As(err, &re) {
		d.step("pricing", promise, fmt.Errorf("asking for an unknown SKU returned %v, expected the responder's error", err), "")
		return
	}
	d.say("            Z-0 failed after %s: %s", time.Since(start).Round(100*time.Microsecond), re.Text)
	if resp.Answered() != 2 {
		d.step("pricing", promise, fmt.Errorf("the responder counted %d answers, expected 2", resp.Answered()), "")
		return
	}
	d.step("pricing", promise, nil, fmt.Sprintf("%d answered; Z-0 failed at once with %q", answered, re.Text))
}

// priceRequest marks a request as a price request.
func priceRequest() rpc.CallOption {
	return rpc.WithEnvelope(acemq.MustEnvelope(acemq.Fields{Type: "price.request"}))
}

// askPrices asks the price of the two known SKUs and checks the answers.
func (d *demo) askPrices(ctx context.Context, ask *rpc.Requester[string, quote], prices map[string]int) (int, error) {
	answered := 0
	for _, sku := range []string{"A-1", "B-7"} {
		qt, err := ask.Ask(ctx, sku, priceRequest())
		if err != nil {
			return answered, fmt.Errorf("asking the price of %s: %w", sku, err)
		}
		if qt.Pence != prices[sku] {
			return answered, fmt.Errorf("%s priced at %d, expected %d", sku, qt.Pence, prices[sku])
		}
		answered++
		d.say("            %s costs %dp", sku, qt.Pence)
	}
	return answered, nil
}

// document is the demo's large payload.
type document struct {
	Title string   `json:"title"`
	Lines []string `json:"lines"`
}

// documentStep sends a large document by claim check: the payload goes to a
// store, the message carries only its key, and the consumer reads the whole
// document back.
func (d *demo) documentStep(ctx context.Context) {
	const promise = "send a 200 KB document by claim check: a small body on the broker, the whole document delivered"
	d.say("step 3: documents — %s", promise)
	q := "acemq-demo-" + d.sfx + ".documents"
	if err := d.declareQueue(ctx, q); err != nil {
		d.step("documents", promise, err, "")
		return
	}
	store := claimcheck.NewMemoryStore()
	codec := claimcheck.Must(acemq.JSON, store)
	doc := document{Title: "catalogue 2026"}
	for i := 0; len(doc.Lines)*40 < 200_000; i++ {
		doc.Lines = append(doc.Lines, fmt.Sprintf("item %06d: a line of the catalogue", i))
	}
	want := sha256.Sum256([]byte(strings.Join(doc.Lines, "\n")))

	type got struct {
		bodyLen int
		key     string
		sum     [32]byte
		lines   int
	}
	received := make(chan got, 1)
	c, err := acemq.Consume(ctx, d.conn, q, func(ctx context.Context, m acemq.Message[document]) acemq.Ack {
		key, _ := claimcheck.KeyOf(m.Body)
		d.narrate("consume", fmt.Sprintf("document (%d lines)", len(m.Payload.Lines)), m.Envelope)
		received <- got{bodyLen: len(m.Body), key: key, sum: sha256.Sum256([]byte(strings.Join(m.Payload.Lines, "\n"))), lines: len(m.Payload.Lines)}
		return acemq.Accept()
	}, acemq.WithCodec(codec), acemq.WithDrainTimeout(5*time.Second))
	if err != nil {
		d.step("documents", promise, err, "")
		return
	}
	d.closeAtEnd(c.Close)

	pub := acemq.NewPublisher[document](d.conn, "", acemq.WithCodec(codec))
	env, err := pub.Send(ctx, q, doc, acemq.WithEnvelope(acemq.MustEnvelope(acemq.Fields{Type: "document.published", Claim: "memory://demo-store"})))
	if err != nil {
		d.step("documents", promise, err, "")
		return
	}
	d.narrate("publish", fmt.Sprintf("document (%d lines)", len(doc.Lines)), typed(env, q))
	select {
	case g := <-received:
		payload, perr := store.Get(ctx, g.key)
		switch {
		case perr != nil:
			err = fmt.Errorf("the store holds nothing under the key %q the body carries: %w", g.key, perr)
		case g.bodyLen >= 1024:
			err = fmt.Errorf("the body on the broker was %d bytes; the claim check did not offload it", g.bodyLen)
		case g.sum != want:
			err = errors.New("the document delivered differs from the one sent")
		case !bytes.HasPrefix(payload, []byte("{")):
			err = errors.New("the stored payload is not the JSON document")
		}
		d.step("documents", promise, err, fmt.Sprintf("%d-byte body on the broker for a %d-byte document (key %s); %d lines delivered intact", g.bodyLen, len(payload), short(g.key), g.lines))
	case <-ctx.Done():
		d.step("documents", promise, ctx.Err(), "")
	}
}

// hop is one step of a route's run, as its consumer saw it.
type hop struct {
	step string
	env  acemq.Envelope
}

// collectHops waits up to 15 seconds for n hops.
func collectHops(ctx context.Context, hops <-chan hop, n int) ([]hop, error) {
	var got []hop
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	for len(got) < n {
		select {
		case h := <-hops:
			got = append(got, h)
		case <-wctx.Done():
			return got, fmt.Errorf("only %d of %d steps ran: %w", len(got), n, wctx.Err())
		}
	}
	return got, nil
}

// checkHops checks that the hops ran the steps in order, in run runID, each
// caused by the one before, in one conversation.
func checkHops(got []hop, steps []string, runID string) error {
	for i, h := range got {
		switch {
		case h.step != steps[i]:
			return fmt.Errorf("hop %d ran step %s, expected %s", i+1, h.step, steps[i])
		case h.env.Fields().RouteID != runID:
			return fmt.Errorf("hop %d carries run id %s, expected %s", i+1, h.env.Fields().RouteID, runID)
		case h.env.Fields().RoutePosition != i:
			return fmt.Errorf("hop %d is at position %d, expected %d", i+1, h.env.Fields().RoutePosition, i)
		case i > 0 && h.env.CausationID() != got[i-1].env.ID():
			return fmt.Errorf("hop %d was not caused by hop %d", i+1, i)
		case i > 0 && h.env.CorrelationID() != got[0].env.CorrelationID():
			return fmt.Errorf("hop %d left the conversation", i+1)
		}
	}
	return nil
}

// routeStep runs an order along a declared three-step route: each step does
// its work and the library forwards the result to the next, each hop a new
// message caused by the one before, in the same conversation.
func (d *demo) routeStep(ctx context.Context) {
	const promise = "run an order along validate → reserve → dispatch, one hop per step, causation chained"
	d.say("step 4: route — %s", promise)
	steps := []string{"validate", "reserve", "dispatch"}
	p, err := route.NewPipeline(d.conn, "acemq-demo-"+d.sfx+".fulfil", steps)
	if err != nil {
		d.step("route", promise, err, "")
		return
	}
	halves := topology.New() // the dead-letter halves the steps' consumers declare
	for _, s := range steps {
		halves.Queue(contract.DeadLetterQueue(p.Queue(s))).Queue(contract.ParkedQueue(p.Queue(s)))
	}
	d.deleteAtEnd(halves)
	if err := d.apply(ctx, p.Topology()); err != nil {
		d.step("route", promise, err, "")
		return
	}
	d.say("  pipeline %s: exchange %s, queues %s", strings.Join(steps, " → "), p.Name(), strings.Join([]string{p.Queue(steps[0]), "…"}, ", "))

	hops := make(chan hop, len(steps))
	for i, s := range steps {
		last := i == len(steps)-1
		step := s
		c, err := route.Step(ctx, p, step, func(ctx context.Context, m acemq.Message[order]) (route.Output[order], error) {
			d.narrate(step, m.Payload.ID, m.Envelope)
			hops <- hop{step: step, env: m.Envelope}
			if last {
				return route.End[order](), nil
			}
			o := m.Payload
			o.Note = o.Note + "+" + step
			return route.Forward(o), nil
		}, acemq.WithDrainTimeout(5*time.Second))
		if err != nil {
			d.step("route", promise, err, "")
			return
		}
		d.closeAtEnd(c.Close)
	}
	runID, err := p.Start(ctx, order{ID: "o-7", SKU: "A-1", Qty: 1, Note: "routed"})
	if err != nil {
		d.step("route", promise, err, "")
		return
	}
	d.say("  started run %s", short(runID))
	got, err := collectHops(ctx, hops, len(steps))
	if err == nil {
		err = checkHops(got, steps, runID)
	}
	d.step("route", promise, err, fmt.Sprintf("run %s: %d hops, each caused by the one before, one correlation", short(runID), len(got)))
}

// replayStep moves the poison order out of orders.new.dlq back onto
// orders.new, where (the rule having been fixed) it is now accepted.
func (d *demo) replayStep(ctx context.Context, n ordersNames) {
	const promise = "replay the dead-lettered order from .dlq; accepted on its second life"
	d.say("step 5: replay — %s", promise)
	dlq := contract.DeadLetterQueue(n.queue)
	before := d.count(n.queue, acemq.OutcomeAcked)
	res, err := replay.Run(ctx, d.conn, dlq)
	if err == nil && res.Moved != 1 {
		err = fmt.Errorf("moved %d messages from %s, expected 1 (%s)", res.Moved, dlq, res.Reason)
	}
	if err != nil {
		d.step("replay", promise, err, "")
		return
	}
	d.say("  replay moved %d from %s to %s; stopped: %s", res.Moved, dlq, res.RoutingKey, res.Reason)
	wctx, cancel := context.WithTimeout(ctx, 15*time.Second)
	defer cancel()
	err = waitFor(wctx, "the replayed order to be accepted", func() bool { return d.count(n.queue, acemq.OutcomeAcked) > before })
	if err == nil {
		err = d.expectQueue(ctx, dlq, 0)
	}
	d.step("replay", promise, err, fmt.Sprintf("moved %d, skipped %d (%s); the order was accepted and %s is empty", res.Moved, res.Skipped, res.Reason, dlq))
}
