package acemq

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"github.com/acemq/acemq/topology"
	"log/slog"
	"net/url"
	"strings"
	"testing"

	"github.com/acemq/acemq/driver"
)

// TestEmptyPipelineDoesNotAllocate: a consumer without interceptors or
// middleware (or given empty lists of them) runs a delivery with exactly
// the allocations of its decode and handler, and a publisher without
// interceptors, unpaused, builds a publish with exactly the allocations of
// encoding it and writing its headers: the empty pipeline costs nothing.
func TestEmptyPipelineDoesNotAllocate(t *testing.T) {
	ctx := context.Background()
	c, err := Connect(ctx, "memory://"+t.Name(), WithPublishInterceptors(), WithConsumeInterceptors())
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close(ctx)
	if err := topology.New().Queue("pipe", topology.WithQueueType(topology.QueueClassic)).Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	h := func(_ context.Context, m Message[[]byte]) Ack {
		if len(m.Payload) == 0 {
			return Retry(errors.New("empty"))
		}
		return Accept()
	}
	for name, opts := range map[string][]ConsumeOption{
		"none":  nil,
		"empty": {WithMiddleware[[]byte](), WithConsumeInterceptors()},
	} {
		k, err := Consume(ctx, c, "pipe", h, append(opts, WithCodec(Bytes))...)
		if err != nil {
			t.Fatal(err)
		}
		env := MustEnvelope(Fields{Type: "order.placed"})
		d := driver.Delivery{RoutingKey: "pipe", ContentType: "application/octet-stream", Headers: env.AppendHeaders(nil, "pipe"), Body: []byte("x")}
		direct := testing.AllocsPerRun(200, func() { _, _ = k.core.handle(ctx, d, env) })
		piped := testing.AllocsPerRun(200, func() {
			if ack, _, refused, panicked := k.core.run(ctx, &d, env); ack.decision != DecisionAccept || refused != nil || panicked != nil {
				t.Fatalf("run: %v %v %v", ack, refused, panicked)
			}
		})
		t.Logf("consume (%s): %.0f allocations through the pipeline, %.0f for decode and handler alone", name, piped, direct)
		if piped != direct {
			t.Errorf("the empty consume pipeline (%s) costs %.0f allocations per delivery", name, piped-direct)
		}
		if err := k.Close(ctx); err != nil {
			t.Fatal(err)
		}
	}

	p := NewPublisher[[]byte](c, "", WithCodec(Bytes), WithPublishInterceptors())
	body := []byte("x")
	env := MustEnvelope(Fields{Type: "order.placed", Origin: "o"})
	piped := testing.AllocsPerRun(200, func() {
		if err := p.gate.wait(ctx); err != nil {
			t.Fatal(err)
		}
		var m driver.Message
		e := env
		if err := p.message(ctx, "pipe", body, &e, &m); err != nil {
			t.Fatal(err)
		}
	})
	direct := testing.AllocsPerRun(200, func() {
		b, _ := p.cfg.codec.Encode(body)
		_ = testMessage("", "pipe", env.orDefault().withoutUnknown(), p.cfg.codec.ContentType(), b, &p.boxes)
	})
	t.Logf("publish: %.0f allocations through the pipeline, %.0f for encoding and headers alone", piped, direct)
	if piped != direct {
		t.Errorf("the empty publish pipeline costs %.0f allocations per publish", piped-direct)
	}
}

// TestLogsRedactSecrets: errors logged with a connection event have the
// passwords of the URLs they quote redacted.
func TestLogsRedactSecrets(t *testing.T) {
	var buf bytes.Buffer
	c := &Conn{}
	c.log = newConnLogger(slog.New(slog.NewTextHandler(&buf, nil)), "orders", driver.RedactURL("amqp://app:s3cret@broker:5672/"))
	dialErr := &url.Error{Op: "dial", URL: "amqp://app:s3cret@broker:5672/", Err: errors.New("refused")}
	c.logEvent(driver.Event{Kind: driver.EventLost, Err: fmt.Errorf("the connection was closed: %w", errors.New(`Exception (501) "amqps://app:s3cret@other:5671/ said no"`))})
	c.logEvent(driver.Event{Kind: driver.EventRetrying, Attempt: 2, Err: dialErr})
	c.logEvent(driver.Event{Kind: driver.EventRecovered, Attempt: 2})
	c.logEvent(driver.Event{Kind: driver.EventRedeclared, Attempt: 2})
	c.logEvent(driver.Event{Kind: driver.EventBlocked, Reason: "low on memory"})
	c.logEvent(driver.Event{Kind: driver.EventUnblocked})
	out := buf.String()
	if strings.Contains(out, "s3cret") {
		t.Errorf("a password reached the log:\n%s", out)
	}
	for _, want := range []string{
		"level=WARN msg=\"acemq: the connection to the broker was lost",
		"amqps://app:xxxxx@other",
		"level=INFO msg=\"acemq: reconnecting to the broker\"",
		"the connection to the broker recovered",
		"redeclared the connection's topology",
		"reason=\"low on memory\"",
		"unblocked",
		"acemq.connection=orders",
		"acemq.url=amqp://app:xxxxx@broker:5672/",
	} {
		if !strings.Contains(out, want) {
			t.Errorf("the log lacks %q:\n%s", want, out)
		}
	}
}

// BenchmarkPipeline measures one delivery through run (interceptors,
// decode, middleware, handler) and one publish through message
// (interceptors, encode, headers): with empty chains, and with one
// interceptor and one middleware. Run it with -benchmem.
func BenchmarkPipeline(b *testing.B) {
	ctx := context.Background()
	c, err := Connect(ctx, "memory://"+b.Name())
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close(ctx)
	if err := topology.New().Queue("pipe", topology.WithQueueType(topology.QueueClassic)).Apply(ctx, c); err != nil {
		b.Fatal(err)
	}
	h := func(context.Context, Message[[]byte]) Ack { return Accept() }
	pass := func(next Handler[[]byte]) Handler[[]byte] {
		return func(ctx context.Context, m Message[[]byte]) Ack { return next(ctx, m) }
	}
	look := func(ctx context.Context, d Message[[]byte]) (context.Context, error) { return ctx, nil }
	stamp := func(_ context.Context, p *Publishing) error { p.RoutingKey = "pipe"; return nil }
	env := MustEnvelope(Fields{Type: "order.placed", Origin: "o"})
	d := driver.Delivery{RoutingKey: "pipe", Headers: env.AppendHeaders(nil, "pipe"), Body: []byte("x")}
	for _, tc := range []struct {
		name    string
		consume []ConsumeOption
		publish []PublisherOption
	}{
		{"empty", nil, nil},
		{"one-each", []ConsumeOption{WithMiddleware(pass), WithConsumeInterceptors(look)}, []PublisherOption{WithPublishInterceptors(stamp)}},
	} {
		k, err := Consume(ctx, c, "pipe", h, append(tc.consume, WithCodec(Bytes))...)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("consume/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_, _, _, _ = k.core.run(ctx, &d, env)
			}
		})
		p := NewPublisher[[]byte](c, "", append(tc.publish, WithCodec(Bytes))...)
		b.Run("publish/"+tc.name, func(b *testing.B) {
			b.ReportAllocs()
			for b.Loop() {
				_ = p.gate.wait(ctx)
				var m driver.Message
				e := env
				_ = p.message(ctx, "pipe", d.Body, &e, &m)
			}
		})
		_ = k.Close(ctx)
	}
}
