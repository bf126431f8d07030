package acemq_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/retry"
)

// pipeRig is a connection, a queue and a publisher to it, for the pipeline
// tests.
type pipeRig struct {
	t   *testing.T
	c   *acemq.Conn
	q   string
	rec *acemqtest.Recorder
	pub *acemq.Publisher[string]
}

func newPipeRig(t *testing.T, url string, opts ...acemq.ConnOption) *pipeRig {
	t.Helper()
	c := brokertest.Connect(t, url, opts...)
	q := brokertest.Queue(t, c, "acemq.pipe")
	return &pipeRig{t: t, c: c, q: q, rec: acemqtest.Record(t, c), pub: acemq.NewPublisher[string](c, "", acemq.WithCodec(acemq.Text))}
}

func (r *pipeRig) send(body string, opts ...acemq.SendOption) acemq.Envelope {
	r.t.Helper()
	env, err := r.pub.Send(context.Background(), r.q, body, opts...)
	if err != nil {
		r.t.Fatalf("Send: %v", err)
	}
	return env
}

func (r *pipeRig) consume(h acemq.Handler[string], opts ...acemq.ConsumeOption) *acemq.Consumer {
	r.t.Helper()
	k, err := acemq.Consume(context.Background(), r.c, r.q, h, append([]acemq.ConsumeOption{acemq.WithCodec(acemq.Text)}, opts...)...)
	if err != nil {
		r.t.Fatalf("Consume: %v", err)
	}
	r.t.Cleanup(func() { brokertest.Stop(r.t, k) })
	return k
}

func TestPublishInterceptorsChangeThePublish(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		var order []string
		var mu sync.Mutex
		note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
		c := brokertest.Connect(t, url, acemq.WithPublishInterceptors(func(_ context.Context, p *acemq.Publishing) error {
			note("conn")
			return p.SetHeader("x-tenant", "acme")
		}))
		q := brokertest.Queue(t, c, "acemq.pipe")
		// The publisher's interceptor runs after the connection's, sees
		// its header, and routes the message to q.
		pub := acemq.NewPublisher[string](c, "", acemq.WithCodec(acemq.Text), acemq.WithPublishInterceptors(func(_ context.Context, p *acemq.Publishing) error {
			note("publisher")
			if p.Envelope.Headers()["x-tenant"] != "acme" || p.ContentType != "text/plain; charset=utf-8" || string(p.Body) != "hello" {
				return fmt.Errorf("the interceptor saw %v %q %q", p.Envelope.Headers(), p.ContentType, p.Body)
			}
			p.RoutingKey = q
			var err error
			p.Envelope, err = p.Envelope.Change(func(f *acemq.Fields) { f.Type = "greeting" })
			return err
		}))
		env, err := pub.Send(context.Background(), "nowhere", "hello")
		if err != nil {
			t.Fatalf("Send: %v", err)
		}
		d := brokertest.Get(t, c, q)
		got := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
		if got.Headers()["x-tenant"] != "acme" || got.Type() != "greeting" || got.ID() != env.ID() || d.RoutingKey != q {
			t.Errorf("delivered %v with routing key %q; sent %v", got, d.RoutingKey, env)
		}
		if env.Type() != "greeting" {
			t.Errorf("Send returned %v, not the envelope as sent", env)
		}
		if !slices.Equal(order, []string{"conn", "publisher"}) {
			t.Errorf("interceptors ran in the order %v", order)
		}
		// SendAll's messages go through the same chain.
		rs, err := pub.SendAll(context.Background(), []acemq.Outgoing[string]{{RoutingKey: "nowhere", Payload: "hello"}, {RoutingKey: "nowhere", Payload: "hello"}})
		if err != nil || len(rs) != 2 {
			t.Fatalf("SendAll: %v", err)
		}
		for range rs {
			d := brokertest.Get(t, c, q)
			if got := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID); got.Headers()["x-tenant"] != "acme" || got.Type() != "greeting" {
				t.Errorf("SendAll delivered %v", got)
			}
		}
		if len(order) != 6 {
			t.Errorf("interceptors ran %v", order)
		}
	})
}

func TestPublishInterceptorRefuses(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newPipeRig(t, url)
		errNoTenant := errors.New("no tenant")
		pub := acemq.NewPublisher[string](r.c, "", acemq.WithPublishInterceptors(func(context.Context, *acemq.Publishing) error { return errNoTenant }))
		_, err := pub.Send(context.Background(), r.q, "x")
		if !errors.Is(err, errNoTenant) || !strings.Contains(err.Error(), "a publish interceptor refused the message") {
			t.Fatalf("Send: %v", err)
		}
		if n := brokertest.Depth(t, r.c, r.q); n != 0 {
			t.Errorf("a refused publish reached the queue: depth %d", n)
		}
	})
}

func TestPublishInterceptorCannotSetReservedHeaders(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newPipeRig(t, url)
		var setErr error
		// The interceptor ignores SetHeader's error: the publish fails all
		// the same, since the header was refused, not dropped.
		pub := acemq.NewPublisher[string](r.c, "", acemq.WithPublishInterceptors(func(_ context.Context, p *acemq.Publishing) error {
			setErr = p.SetHeader("X-AceMQ-Attempt", int32(7))
			return nil
		}))
		_, err := pub.Send(context.Background(), r.q, "x")
		var re *acemq.ReservedHeaderError
		if !errors.As(err, &re) || !errors.As(setErr, &re) || !slices.Equal(re.Names, []string{"X-AceMQ-Attempt"}) {
			t.Fatalf("Send: %v; SetHeader: %v", err, setErr)
		}
		if n := brokertest.Depth(t, r.c, r.q); n != 0 {
			t.Errorf("a publish with a reserved header reached the queue: depth %d", n)
		}
	})
}

func TestPublishInterceptorsSkipTheLibrarysRepublishes(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		var calls atomic.Int64
		r := newPipeRig(t, url, acemq.WithPublishInterceptors(func(context.Context, *acemq.Publishing) error {
			calls.Add(1)
			return nil
		}))
		r.consume(func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Retry(errors.New("again")) },
			acemq.WithRetry(retry.Fixed(3, time.Millisecond)))
		r.send("x")
		// Two retries and a dead letter: three republishes the library
		// made, none of them intercepted.
		r.rec.Wait(t, 3)
		if got := calls.Load(); got != 1 {
			t.Errorf("the publish interceptor ran %d times; want 1 (the application's publish only)", got)
		}
	})
}

type tenantKey struct{}

func TestConsumeInterceptorRefuses(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		var order []string
		var mu sync.Mutex
		note := func(s string) { mu.Lock(); order = append(order, s); mu.Unlock() }
		r := newPipeRig(t, url, acemq.WithConsumeInterceptors(func(ctx context.Context, d acemq.Message[[]byte]) (context.Context, error) {
			note("conn " + string(d.Body))
			tenant, _ := d.Envelope.Header("tenant")
			if tenant != "acme" {
				return nil, fmt.Errorf("tenant %v is not allowed", tenant)
			}
			return context.WithValue(ctx, tenantKey{}, tenant), nil
		}))
		handled := make(chan string, 4)
		r.consume(func(ctx context.Context, m acemq.Message[string]) acemq.Ack {
			handled <- fmt.Sprint(m.Payload, " ", ctx.Value(tenantKey{}))
			return acemq.Accept()
		}, acemq.WithConsumeInterceptors(func(ctx context.Context, d acemq.Message[[]byte]) (context.Context, error) {
			note("consumer " + string(d.Body))
			if d.Queue != r.q || d.ContentType != "text/plain; charset=utf-8" {
				return nil, fmt.Errorf("saw queue %q, content type %q", d.Queue, d.ContentType)
			}
			return nil, nil // nil keeps the context
		}))
		evil := acemq.MustEnvelope(acemq.Fields{Headers: map[string]any{"tenant": "evil"}})
		r.send("refused", acemq.WithEnvelope(evil))
		r.send("allowed", acemq.WithEnvelope(acemq.MustEnvelope(acemq.Fields{Headers: map[string]any{"tenant": "acme"}})))
		ss := r.rec.Wait(t, 2)
		if got := brokertest.Receive(t, handled); got != "allowed acme" {
			t.Errorf("the handler got %q", got)
		}
		s := ss[0]
		if s.Envelope.ID() != evil.ID() {
			s = ss[1]
		}
		const want = `an interceptor refused it: Error: tenant evil is not allowed`
		if s.Outcome != acemq.OutcomeRejected || s.Decision != acemq.DecisionReject || s.Target != contract.DeadLetterQueue(r.q) || s.Reason != want {
			t.Errorf("the refused delivery was settled %+v", s)
		}
		d := brokertest.Get(t, r.c, contract.DeadLetterQueue(r.q))
		if got := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID).Reason(); got != want || string(d.Body) != "refused" {
			t.Errorf("the dead letter says %q, body %q", got, d.Body)
		}
		mu.Lock()
		defer mu.Unlock()
		if !slices.Equal(order, []string{"conn refused", "conn allowed", "consumer allowed"}) {
			t.Errorf("interceptors ran %v", order)
		}
	})
}

func TestMiddlewareRunsInOrder(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newPipeRig(t, url)
		var trail []string
		mw := func(name string) acemq.Middleware[string] {
			return func(next acemq.Handler[string]) acemq.Handler[string] {
				return func(ctx context.Context, m acemq.Message[string]) acemq.Ack {
					trail = append(trail, name+">")
					ack := next(ctx, m)
					trail = append(trail, "<"+name+":"+ack.Decision().String())
					if name == "a" {
						return acemq.Accept() // the outermost has the last word
					}
					return ack
				}
			}
		}
		r.consume(func(context.Context, acemq.Message[string]) acemq.Ack {
			trail = append(trail, "handler")
			return acemq.Reject(errors.New("no"))
		}, acemq.WithMiddleware(mw("a"), mw("b")), acemq.WithMiddleware(mw("c")))
		r.send("x")
		s := r.rec.Wait(t, 1)[0]
		want := []string{"a>", "b>", "c>", "handler", "<c:reject", "<b:reject", "<a:reject"}
		if !slices.Equal(trail, want) {
			t.Errorf("ran %v, want %v", trail, want)
		}
		if s.Outcome != acemq.OutcomeAcked {
			t.Errorf("the outermost middleware's Ack was not the one settled: %+v", s)
		}
	})
}

func TestMiddlewareOfAnotherTypeIsRefused(t *testing.T) {
	c := brokertest.Connect(t, brokertest.MemoryURL(t))
	q := brokertest.Queue(t, c, "acemq.pipe")
	h := func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() }
	for _, tc := range []struct {
		opt  acemq.ConsumeOption
		want string
	}{
		{acemq.WithMiddleware[int](func(h acemq.Handler[int]) acemq.Handler[int] { return h }), "WithMiddleware was given a acemq.Middleware[int], but the consumer's messages are string"},
		{acemq.WithMiddleware[string](nil), "nil middleware"},
		{acemq.WithConsumeInterceptors(nil), "nil interceptor"},
		{acemq.WithMiddleware(func(acemq.Handler[string]) acemq.Handler[string] { return nil }), "returned a nil handler"},
	} {
		k, err := acemq.Consume(context.Background(), c, q, h, tc.opt)
		if err == nil {
			brokertest.Stop(t, k)
		}
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("Consume: %v, want %q", err, tc.want)
		}
	}
	pub := acemq.NewPublisher[string](c, "", acemq.WithPublishInterceptors(nil))
	if _, err := pub.Send(context.Background(), q, "x"); err == nil || !strings.Contains(err.Error(), "nil interceptor") {
		t.Errorf("Send: %v", err)
	}
}

func TestConsumeInterceptorTimeCountsInTheDuration(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		const pause = 30 * time.Millisecond
		r := newPipeRig(t, url, acemq.WithConsumeInterceptors(func(ctx context.Context, _ acemq.Message[[]byte]) (context.Context, error) {
			time.Sleep(pause)
			return ctx, nil
		}))
		r.consume(func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() })
		r.send("x")
		if s := r.rec.Wait(t, 1)[0]; s.Duration < pause {
			t.Errorf("the settlement's duration %s leaves out the interceptor's %s", s.Duration, pause)
		}
	})
}

func TestPanicInAnInterceptorIsAFatalReject(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newPipeRig(t, url)
		r.consume(func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() },
			acemq.WithConsumeInterceptors(func(context.Context, acemq.Message[[]byte]) (context.Context, error) { panic("boom") }))
		r.send("x")
		s := r.rec.Wait(t, 1)[0]
		var pe *acemq.PanicError
		if s.Outcome != acemq.OutcomeRejected || !errors.As(s.Err, &pe) || !strings.HasPrefix(s.Reason, "the handler reported an unprocessable message: PanicError: panic: boom") {
			t.Errorf("settled %+v", s)
		}
	})
}

func TestEmptyChainsChangeNothing(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newPipeRig(t, url, acemq.WithPublishInterceptors(), acemq.WithConsumeInterceptors())
		r.consume(func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() }, acemq.WithMiddleware[string]())
		env := r.send("x")
		if s := r.rec.Wait(t, 1)[0]; s.Outcome != acemq.OutcomeAcked || s.Envelope.ID() != env.ID() {
			t.Errorf("settled %+v", s)
		}
	})
}

func TestConsumerPauseAndResume(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newPipeRig(t, url)
		var handled atomic.Int64
		k := r.consume(func(context.Context, acemq.Message[string]) acemq.Ack {
			handled.Add(1)
			return acemq.Accept()
		})
		r.send("before")
		r.rec.Wait(t, 1)
		ctx := context.Background()
		if err := k.Pause(ctx); err != nil {
			t.Fatalf("Pause: %v", err)
		}
		if !k.Paused() || !k.Running() {
			t.Errorf("after Pause: Paused %v, Running %v", k.Paused(), k.Running())
		}
		if err := k.Pause(ctx); err != nil {
			t.Fatalf("a second Pause: %v", err)
		}
		// Pause returned after the subscription was cancelled: whatever
		// arrives now stays on the queue.
		for i := range 5 {
			r.send(fmt.Sprint("during ", i))
		}
		if n := brokertest.Depth(t, r.c, r.q); n != 5 {
			t.Errorf("a paused consumer left %d of 5 messages on the queue", n)
		}
		if got := handled.Load(); got != 1 {
			t.Errorf("a paused consumer handled %d messages", got-1)
		}
		rep := r.c.Health(ctx)
		if rep.Status != acemq.HealthUp || !slices.Equal(rep.Parts["paused"].([]string), []string{r.q}) {
			t.Errorf("health while paused: %+v", rep)
		}
		if err := k.Resume(ctx); err != nil {
			t.Fatalf("Resume: %v", err)
		}
		if err := k.Resume(ctx); err != nil {
			t.Fatalf("a second Resume: %v", err)
		}
		r.rec.Wait(t, 6)
		if got := handled.Load(); got != 6 || k.Paused() {
			t.Errorf("after Resume: %d handled, paused %v", got, k.Paused())
		}
		// And again: a resumed consumer pauses like a new one.
		if err := k.Pause(ctx); err != nil {
			t.Fatal(err)
		}
		r.send("second pause")
		if n := brokertest.Depth(t, r.c, r.q); n != 1 {
			t.Errorf("depth %d during the second pause", n)
		}
		if err := k.Resume(ctx); err != nil {
			t.Fatal(err)
		}
		r.rec.Wait(t, 7)
	})
}

func TestConsumerPausePutsBackWhatItHasNotStarted(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newPipeRig(t, url)
		started := make(chan string, 8)
		release := make(chan struct{})
		k := r.consume(func(_ context.Context, m acemq.Message[string]) acemq.Ack {
			started <- m.Payload
			<-release
			return acemq.Accept()
		}, acemq.WithPrefetch(10))
		for i := range 4 {
			r.send(fmt.Sprint(i))
		}
		first := brokertest.Receive(t, started)
		// Wait until the broker has handed the other three to the consumer.
		testenv.Eventually(t, "the others prefetched", func() bool { return brokertest.Depth(t, r.c, r.q) == 0 })
		paused := make(chan error, 1)
		go func() { paused <- k.Pause(context.Background()) }()
		testenv.Eventually(t, "Paused", k.Paused)
		close(release) // the running handler finishes; Pause then returns
		if err := brokertest.Receive(t, paused); err != nil {
			t.Fatalf("Pause: %v", err)
		}
		if s := r.rec.Wait(t, 1)[0]; s.Outcome != acemq.OutcomeAcked {
			t.Errorf("the running handler's delivery was settled %+v", s)
		}
		testenv.Eventually(t, "the three put back", func() bool { return brokertest.Depth(t, r.c, r.q) == 3 })
		select {
		case p := <-started:
			t.Errorf("a paused consumer started %q (the first was %q)", p, first)
		default:
		}
		if err := k.Resume(context.Background()); err != nil {
			t.Fatal(err)
		}
		for range 3 {
			brokertest.Receive(t, started)
		}
		r.rec.Wait(t, 4)
	})
}

func TestPublisherPauseAndResume(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newPipeRig(t, url)
		r.pub.Pause()
		if !r.pub.Paused() {
			t.Fatal("Paused is false after Pause")
		}
		ctx, cancel := context.WithCancel(context.Background())
		cancel()
		if _, err := r.pub.Send(ctx, r.q, "x"); !errors.Is(err, acemq.ErrPaused) || !errors.Is(err, context.Canceled) {
			t.Errorf("Send on a paused publisher with an ended context: %v", err)
		}
		if _, err := r.pub.SendAll(ctx, []acemq.Outgoing[string]{{RoutingKey: r.q, Payload: "y"}}); !errors.Is(err, acemq.ErrPaused) {
			t.Errorf("SendAll on a paused publisher with an ended context: %v", err)
		}
		sent := make(chan error, 1)
		go func() {
			_, err := r.pub.Send(context.Background(), r.q, "held")
			sent <- err
		}()
		if n := brokertest.Depth(t, r.c, r.q); n != 0 {
			t.Errorf("a paused publisher published: depth %d", n)
		}
		r.pub.Resume()
		if err := brokertest.Receive(t, sent); err != nil {
			t.Fatalf("the held Send: %v", err)
		}
		if n := brokertest.Depth(t, r.c, r.q); n != 1 || r.pub.Paused() {
			t.Errorf("after Resume: depth %d, paused %v", n, r.pub.Paused())
		}
	})
}

// busyConsumers starts two consumers on a connection of their own, each
// with a handler that blocks on release, and waits until both handlers run.
// Their queues are declared, and deleted at the end, through another
// connection, so the test may close c.
func busyConsumers(t *testing.T, url string, release <-chan struct{}) (*acemq.Conn, []*acemq.Consumer) {
	t.Helper()
	admin := brokertest.Connect(t, url)
	c, err := acemq.Connect(context.Background(), url)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close(context.Background()) })
	started := make(chan struct{}, 2)
	var ks []*acemq.Consumer
	for range 2 {
		q := brokertest.Queue(t, admin, "acemq.pipe")
		k, err := acemq.Consume(context.Background(), c, q, func(context.Context, acemq.Message[string]) acemq.Ack {
			started <- struct{}{}
			<-release
			return acemq.Accept()
		}, acemq.WithCodec(acemq.Text))
		if err != nil {
			t.Fatal(err)
		}
		ks = append(ks, k)
		if _, err := acemq.NewPublisher[string](c, "", acemq.WithCodec(acemq.Text)).Send(context.Background(), q, "x"); err != nil {
			t.Fatal(err)
		}
	}
	brokertest.Receive(t, started)
	brokertest.Receive(t, started)
	return c, ks
}

func TestConnCloseDrainsConsumersAtOnce(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		release := make(chan struct{})
		c, ks := busyConsumers(t, url, release)
		closed := make(chan error, 1)
		go func() { closed <- c.Close(context.Background()) }()
		// Both consumers stop taking deliveries while both handlers still
		// run: the drains happen side by side, not one after the other.
		testenv.Eventually(t, "both consumers stopping", func() bool { return !ks[0].Running() && !ks[1].Running() })
		close(release)
		if err := brokertest.Receive(t, closed); err != nil {
			t.Errorf("Close: %v", err)
		}
		for _, k := range ks {
			<-k.Done()
		}
	})
}

func TestConnCloseIsOneDeadline(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		release := make(chan struct{})
		defer close(release)
		c, _ := busyConsumers(t, url, release)
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		err := c.Close(ctx)
		var n int
		if joined, ok := err.(interface{ Unwrap() []error }); ok {
			for _, e := range joined.Unwrap() {
				var de *acemq.DrainError
				if errors.As(e, &de) && de.Stranded == 1 {
					n++
				}
			}
		}
		if n != 2 {
			t.Errorf("Close: %v; want a DrainError for each consumer", err)
		}
	})
}

func TestResumeOfAStoppedConsumerIsRefused(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newPipeRig(t, url)
		k := r.consume(func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() })
		if _, err := brokertest.Driver(r.c).DeleteQueue(context.Background(), r.q); err != nil {
			t.Fatal(err)
		}
		testenv.Eventually(t, "the consumer stopped", func() bool { return !k.Running() })
		if err := k.Pause(context.Background()); err != nil {
			t.Fatalf("Pause of a stopped consumer: %v", err)
		}
		if err := k.Resume(context.Background()); err == nil || !strings.Contains(err.Error(), "close it and start a new one") {
			t.Errorf("Resume of a stopped consumer: %v", err)
		}
	})
}
