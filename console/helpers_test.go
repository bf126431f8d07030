package console_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/console"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/queues"
	_ "github.com/acemq/acemq/rabbitmq"
	"github.com/acemq/acemq/topology"
)

// QuantityError and SKUError are the two reasons the test consumer
// rejects orders with.
type QuantityError struct{ ID string }

func (e *QuantityError) Error() string { return "order " + e.ID + ": the quantity must be positive" }

type SKUError struct{ SKU string }

func (e *SKUError) Error() string { return "no price for SKU " + e.SKU }

type order struct {
	ID  string `json:"id"`
	SKU string `json:"sku"`
	Qty int    `json:"qty"`
}

// fixture is a queue whose consumer dead-lettered orders for two reasons.
type fixture struct {
	conn     *acemq.Conn
	queue    string
	dlq      string
	qtyIDs   map[string]bool // envelope ids of the orders rejected for their quantity
	skuIDs   map[string]bool
	topology *topology.Topology
}

// deadLetters declares queue (with its dead-letter half), runs a consumer
// that rejects nQty orders with a QuantityError and nSKU with an SKUError,
// waits for all of them to reach queue.dlq, and stops the consumer. On
// memory the queue is named orders.new; on RabbitMQ it is unique, and
// deleted at the end.
func deadLetters(t *testing.T, url string, nQty, nSKU int) *fixture {
	t.Helper()
	ctx := context.Background()
	conn := brokertest.Connect(t, url)
	q := "orders.new"
	if !strings.HasPrefix(url, "memory://") {
		q = testenv.Unique(t, "console") + ".orders.new"
	}
	topo := topology.New().Queue(q, topology.WithDeadLettering(true))
	if err := topo.Apply(ctx, conn); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = topo.Delete(context.Background(), conn) })
	h := func(ctx context.Context, m acemq.Message[order]) acemq.Ack {
		if m.Payload.Qty <= 0 {
			return acemq.Reject(&QuantityError{ID: m.Payload.ID})
		}
		return acemq.Reject(&SKUError{SKU: m.Payload.SKU})
	}
	c, err := acemq.Consume(ctx, conn, q, h)
	if err != nil {
		t.Fatal(err)
	}
	f := &fixture{conn: conn, queue: q, dlq: contract.DeadLetterQueue(q), qtyIDs: map[string]bool{}, skuIDs: map[string]bool{}, topology: topo}
	pub := acemq.NewPublisher[order](conn, "")
	typed := func() acemq.SendOption {
		return acemq.WithEnvelope(acemq.MustEnvelope(acemq.Fields{Type: "order.placed"}))
	}
	for i := range nQty {
		env, err := pub.Send(ctx, q, order{ID: fmt.Sprintf("o-%d", i), SKU: "A-1", Qty: -i}, typed())
		if err != nil {
			t.Fatal(err)
		}
		f.qtyIDs[env.ID()] = true
	}
	for i := range nSKU {
		env, err := pub.Send(ctx, q, order{ID: fmt.Sprintf("o-%d", 100+i), SKU: fmt.Sprintf("Z-%d", i), Qty: 1}, typed())
		if err != nil {
			t.Fatal(err)
		}
		f.skuIDs[env.ID()] = true
	}
	if len(f.qtyIDs) != nQty || len(f.skuIDs) != nSKU {
		t.Fatalf("the orders do not have distinct ids: %v %v", f.qtyIDs, f.skuIDs)
	}
	testenv.Eventually(t, "every order in "+f.dlq, func() bool { return brokertest.Depth(t, conn, f.dlq) == nQty+nSKU })
	brokertest.Stop(t, c)
	return f
}

// client talks to a console's API as its page does.
type client struct {
	t    testing.TB
	srv  *httptest.Server
	csrf string
}

// serve serves a console on conn and returns a client of it.
func serve(t testing.TB, conn *acemq.Conn, opts ...console.Option) *client {
	t.Helper()
	con, err := console.New(conn, opts...)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(con)
	t.Cleanup(func() { _ = con.Close(); srv.Close() })
	c := &client{t: t, srv: srv}
	c.csrf = c.guard()
	return c
}

// guard reads the cross-site guard off the page.
func (c *client) guard() string {
	c.t.Helper()
	resp, err := http.Get(c.srv.URL + "/")
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	_, rest, ok := strings.Cut(string(b), `name="acemq-console" content="`)
	if !ok {
		c.t.Fatalf("the page carries no guard: %s", b)
	}
	v, _, _ := strings.Cut(rest, `"`)
	return v
}

// do sends a request with the guard and decodes a JSON answer into out
// (when not nil); it returns the status.
func (c *client) do(method, path, body string, out any) int {
	c.t.Helper()
	req, err := http.NewRequest(method, c.srv.URL+path, strings.NewReader(body))
	if err != nil {
		c.t.Fatal(err)
	}
	req.Header.Set("X-Acemq-Console", c.csrf)
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		c.t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	if out != nil {
		if err := json.Unmarshal(b, out); err != nil {
			c.t.Fatalf("%s %s: %d %s: %v", method, path, resp.StatusCode, b, err)
		}
	}
	return resp.StatusCode
}

// view is the part of GET /api/queues/NAME the tests read.
type view struct {
	Queue   string `json:"queue"`
	Target  string `json:"target"`
	Actions bool   `json:"actions"`
	Peeked  int    `json:"peeked"`
	Groups  []struct {
		ID       string `json:"id"`
		Key      string `json:"key"`
		Count    int    `json:"count"`
		First    string `json:"firstSeen"`
		Last     string `json:"lastSeen"`
		Messages []struct {
			ID string `json:"id"`
		} `json:"messages"`
	} `json:"groups"`
}

type result struct {
	Action  string `json:"action"`
	Count   int    `json:"count"`
	Skipped int    `json:"skipped"`
	Message string `json:"message"`
	Error   string `json:"error"`
}

// peekIDs reads the ids of every message of queue, and puts them back.
func peekIDs(t *testing.T, conn *acemq.Conn, queue string) map[string]bool {
	t.Helper()
	ctx := context.Background()
	b, err := queues.Browse(ctx, conn, queue)
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()
	out := map[string]bool{}
	for {
		m, ok, err := b.Next(ctx)
		if err != nil {
			t.Fatal(err)
		}
		if !ok {
			return out
		}
		out[m.Envelope.ID()] = true
	}
}
