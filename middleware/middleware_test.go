package middleware_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/acemqtest"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/middleware"
	"github.com/acemq/acemq/retry"
	"golang.org/x/time/rate"
)

type rig struct {
	t   *testing.T
	c   *acemq.Conn
	q   string
	rec *acemqtest.Recorder
}

func newRig(t *testing.T, url string) *rig {
	c := brokertest.Connect(t, url)
	return &rig{t: t, c: c, q: brokertest.Queue(t, c, "acemq.mw"), rec: acemqtest.Record(t, c)}
}

func (r *rig) consume(h acemq.Handler[string], opts ...acemq.ConsumeOption) *acemq.Consumer {
	r.t.Helper()
	k, err := acemq.Consume(context.Background(), r.c, r.q, h, append([]acemq.ConsumeOption{acemq.WithCodec(acemq.Text)}, opts...)...)
	if err != nil {
		r.t.Fatal(err)
	}
	r.t.Cleanup(func() { brokertest.Stop(r.t, k) })
	return k
}

func (r *rig) send(body string, opts ...acemq.SendOption) acemq.Envelope {
	r.t.Helper()
	env, err := acemq.NewPublisher[string](r.c, "", acemq.WithCodec(acemq.Text)).Send(context.Background(), r.q, body, opts...)
	if err != nil {
		r.t.Fatal(err)
	}
	return env
}

// TestTimeout: a handler that runs past its time is retried, whether it
// gives up when its context ends or ignores it and returns an accept; on
// the next attempt, in time, its own Ack stands.
func TestTimeout(t *testing.T) {
	const d = 20 * time.Millisecond
	for _, tc := range []struct {
		name string
		slow func(ctx context.Context) acemq.Ack
	}{
		{"heeds its context", func(ctx context.Context) acemq.Ack {
			<-ctx.Done()
			return acemq.FromError(ctx.Err())
		}},
		{"ignores its context", func(context.Context) acemq.Ack {
			start := time.Now()
			for time.Since(start) < 3*d {
				time.Sleep(d)
			}
			return acemq.Accept()
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			brokertest.Each(t, func(t *testing.T, url string) {
				r := newRig(t, url)
				var causes []error
				var mu sync.Mutex
				r.consume(func(ctx context.Context, m acemq.Message[string]) acemq.Ack {
					if m.Envelope.Attempt() == 1 {
						ack := tc.slow(ctx)
						mu.Lock()
						causes = append(causes, context.Cause(ctx))
						mu.Unlock()
						return ack
					}
					return acemq.Accept()
				}, acemq.WithMiddleware(middleware.Timeout[string](d)), acemq.WithRetry(retry.Fixed(2, time.Millisecond)))
				r.send("x")
				ss := r.rec.Wait(t, 2)
				// A wait in the consumer records its settlement after the
				// copy was taken: order them by attempt.
				if ss[0].Envelope.Attempt() == 2 {
					ss[0], ss[1] = ss[1], ss[0]
				}
				var te *middleware.TimeoutError
				if ss[0].Outcome != acemq.OutcomeRetried || !errors.As(ss[0].Err, &te) || te.After != d ||
					ss[0].Reason != "TimeoutError: the handler did not finish within 20ms" {
					t.Errorf("the slow attempt was settled %+v", ss[0])
				}
				if ss[1].Outcome != acemq.OutcomeAcked || ss[1].Envelope.Attempt() != 2 {
					t.Errorf("the attempt in time was settled %+v", ss[1])
				}
				mu.Lock()
				defer mu.Unlock()
				if len(causes) != 1 || !errors.As(causes[0], &te) {
					t.Errorf("the handler's context ended with %v", causes)
				}
			})
		})
	}
}

func TestTimeoutKeepsAnAckInTime(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newRig(t, url)
		r.consume(func(ctx context.Context, _ acemq.Message[string]) acemq.Ack {
			if _, ok := ctx.Deadline(); !ok {
				return acemq.Reject(errors.New("no deadline"))
			}
			return acemq.Park(errors.New("kept"))
		}, acemq.WithMiddleware(middleware.Timeout[string](time.Hour)))
		r.send("x")
		if s := r.rec.Wait(t, 1)[0]; s.Outcome != acemq.OutcomeParked {
			t.Errorf("settled %+v", s)
		}
	})
}

func TestTimeoutRefusesNonsense(t *testing.T) {
	defer func() {
		if r := recover(); r == nil || !strings.Contains(r.(string), "must be positive") {
			t.Errorf("recovered %v", r)
		}
	}()
	middleware.Timeout[string](0)
}

// TestRateLimit: calls beyond the bucket wait for a token, holding their
// delivery; a wait cut short by the drain strands the delivery, which goes
// back to the queue.
func TestRateLimit(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newRig(t, url)
		l := rate.NewLimiter(rate.Every(time.Hour), 2) // two now, then one an hour
		var calls atomic.Int64
		k, err := acemq.Consume(context.Background(), r.c, r.q, func(context.Context, acemq.Message[string]) acemq.Ack {
			calls.Add(1)
			return acemq.Accept()
		}, acemq.WithCodec(acemq.Text), acemq.WithMiddleware(middleware.RateLimit[string](l)), acemq.WithDrainTimeout(50*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		for range 3 {
			r.send("x")
		}
		r.rec.Wait(t, 2)
		// The third waits for a token inside the middleware.
		testenv.Eventually(t, "the third waiting", func() bool { return k.InFlight() == 1 })
		if n := calls.Load(); n != 2 {
			t.Fatalf("%d calls before the limiter allowed a third", n)
		}
		var de *acemq.DrainError
		if err := k.Close(context.Background()); !errors.As(err, &de) || de.Stranded != 1 {
			t.Errorf("Close: %v", err)
		}
		if n := calls.Load(); n != 2 {
			t.Errorf("%d calls", n)
		}
		testenv.Eventually(t, "the third back on the queue", func() bool { return brokertest.Depth(t, r.c, r.q) == 1 })
	})
}

// TestRateLimitSpacesCalls: with a burst of one, calls are at least the
// limiter's interval apart.
func TestRateLimitSpacesCalls(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newRig(t, url)
		const every = 30 * time.Millisecond
		r.consume(func(context.Context, acemq.Message[string]) acemq.Ack { return acemq.Accept() },
			acemq.WithMiddleware(middleware.RateLimit[string](rate.NewLimiter(rate.Every(every), 1))), acemq.WithConcurrency(3))
		start := time.Now()
		for range 4 {
			r.send("x")
		}
		r.rec.Wait(t, 4)
		// A token bucket's lower bound: four calls from a bucket of one
		// take at least three intervals, however fast the machine.
		if took := time.Since(start); took < 3*every {
			t.Errorf("four calls took %s, less than three intervals of %s", took, every)
		}
	})
}

func TestRateLimitThatAllowsNothingRetries(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newRig(t, url)
		var calls atomic.Int64
		r.consume(func(context.Context, acemq.Message[string]) acemq.Ack {
			calls.Add(1)
			return acemq.Accept()
		}, acemq.WithMiddleware(middleware.RateLimit[string](rate.NewLimiter(1, 0))))
		r.send("x")
		s := r.rec.Wait(t, 1)[0]
		if s.Decision != acemq.DecisionRetry || !strings.Contains(s.Reason, "the rate limit allowed no call") || calls.Load() != 0 {
			t.Errorf("settled %+v after %d calls", s, calls.Load())
		}
	})
}

// TestLog: one line per message with the envelope's fields as attributes,
// at Info for an accept and Warn otherwise, and no header value or body.
func TestLog(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		r := newRig(t, url)
		var buf bytes.Buffer
		var mu sync.Mutex
		l := slog.New(slog.NewJSONHandler(&lockedWriter{w: &buf, mu: &mu}, nil))
		r.consume(func(_ context.Context, m acemq.Message[string]) acemq.Ack {
			if m.Payload == "bad" {
				return acemq.Reject(errors.New("no such order"))
			}
			return acemq.Accept()
		}, acemq.WithMiddleware(middleware.Log[string](l)))
		env := acemq.MustEnvelope(acemq.Fields{Type: "order.placed", CorrelationID: "conv-1", Origin: "shop@host", Headers: map[string]any{"secret-token": "hunter2"}})
		r.send("good-body", acemq.WithEnvelope(env))
		r.send("bad")
		r.rec.Wait(t, 2)
		mu.Lock()
		out := buf.String()
		mu.Unlock()
		lines := strings.Split(strings.TrimSpace(out), "\n")
		if len(lines) != 2 {
			t.Fatalf("logged %d lines:\n%s", len(lines), out)
		}
		var first, second map[string]any
		_ = json.Unmarshal([]byte(lines[0]), &first)
		_ = json.Unmarshal([]byte(lines[1]), &second)
		want := map[string]any{"level": "INFO", "queue": r.q, "routing.key": r.q, "message.id": env.ID(), "message.type": "order.placed",
			"correlation.id": "conv-1", "origin": "shop@host", "attempt": float64(1), "redelivered": false, "decision": "accept"}
		for k, v := range want {
			if first[k] != v {
				t.Errorf("%s = %v, want %v (line %s)", k, first[k], v, lines[0])
			}
		}
		if second["level"] != "WARN" || second["decision"] != "reject" || second["error"] != "no such order" {
			t.Errorf("the rejected message logged %s", lines[1])
		}
		if strings.Contains(out, "hunter2") || strings.Contains(out, "good-body") {
			t.Errorf("a header value or body reached the log:\n%s", out)
		}
	})
}

type lockedWriter struct {
	w  *bytes.Buffer
	mu *sync.Mutex
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
