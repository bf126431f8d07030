package claimcheck

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/memory"
	_ "github.com/acemq/acemq/rabbitmq"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

// eachBroker runs f against a fresh memory:// broker and against RabbitMQ
// (skipped without ACEMQ_TEST_AMQP_URL, failed in CI).
func eachBroker(t *testing.T, f func(t *testing.T, url string)) {
	t.Run("memory", func(t *testing.T) {
		url := "memory://" + sanitize(t.Name())
		t.Cleanup(func() { memory.Reset(url) })
		f(t, url)
	})
	t.Run("rabbitmq", func(t *testing.T) { f(t, testenv.AMQPURL(t)) })
}

func sanitize(s string) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, s)
}

func connect(t *testing.T, url string) *acemq.Conn {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	c, err := acemq.Connect(ctx, url, acemq.WithName(t.Name()))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		_ = c.Close(ctx)
	})
	return c
}

// sourceQueue declares a uniquely named durable queue and deletes it and its
// dead-letter half when the test ends.
func sourceQueue(t *testing.T, c *acemq.Conn) string {
	t.Helper()
	q := fmt.Sprintf("claimcheck-test-%s-%08x", sanitize(t.Name()), rand.Uint32())
	ctx := context.Background()
	if _, err := c.Transport().DeclareQueue(ctx, driver.Queue{Name: q, Durable: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		for _, n := range []string{q, acemq.DeadLetterQueue(q), acemq.ParkedQueue(q)} {
			_, _ = c.Transport().DeleteQueue(context.Background(), n)
		}
	})
	return q
}

// getOne polls queue until a message arrives or the deadline passes, and
// acks it.
func getOne(t *testing.T, c *acemq.Conn, queue string) driver.Delivery {
	t.Helper()
	deadline := time.Now().Add(15 * time.Second)
	for time.Now().Before(deadline) {
		d, ok, err := c.Transport().Get(context.Background(), queue)
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			_ = d.Ack()
			return d
		}
		time.Sleep(20 * time.Millisecond)
	}
	t.Fatalf("nothing arrived on %s", queue)
	return driver.Delivery{}
}

func receive[T any](t *testing.T, ch <-chan T) T {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(15 * time.Second):
		t.Fatal("timed out waiting for a delivery")
	}
	var zero T
	return zero
}

func closeConsumer(t *testing.T, c *acemq.Consumer) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Close(ctx); err != nil {
		t.Fatal(err)
	}
}

func TestRoundTripThroughABroker(t *testing.T) {
	eachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q := sourceQueue(t, c)
		store := NewMemoryStore()
		cc := Must(acemq.Bytes, store)
		got := make(chan acemq.Message[[]byte], 4)
		cons, err := acemq.Consume(context.Background(), c, q, func(_ context.Context, m acemq.Message[[]byte]) acemq.Ack {
			got <- m
			return acemq.Accept()
		}, acemq.WithCodec(cc))
		if err != nil {
			t.Fatal(err)
		}
		defer closeConsumer(t, cons)
		pub := acemq.NewPublisher[[]byte](c, "", acemq.WithCodec(cc))
		small, big := payload(65535), payload(65536)
		for _, p := range [][]byte{small, big} {
			if _, err := pub.Send(context.Background(), q, p); err != nil {
				t.Fatal(err)
			}
		}
		m := receive(t, got)
		if !bytes.Equal(m.Payload, small) || len(m.Body) != 65538 || m.Body[2] != Inline {
			t.Fatalf("small: payload %d bytes, body %d bytes", len(m.Payload), len(m.Body))
		}
		if m.ContentType != "application/octet-stream" {
			t.Fatalf("content type %q, want the wrapped codec's", m.ContentType)
		}
		m = receive(t, got)
		if !bytes.Equal(m.Payload, big) || len(m.Body) != 39 || m.Body[2] != Stored {
			t.Fatalf("big: payload %d bytes, body %d bytes", len(m.Payload), len(m.Body))
		}
		if m.Envelope.Claim() != "" {
			t.Fatalf("the codec wrote x-acemq-claim = %q", m.Envelope.Claim())
		}
	})
}

// x-acemq-claim is the operators' business: the codec neither writes nor
// reads it (WIRE.md §4.1).
func TestClaimHeaderIsNotTheSignal(t *testing.T) {
	eachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q := sourceQueue(t, c)
		store := NewMemoryStore()
		_ = store.Put(context.Background(), "k1", []byte("from the store"))
		cc := Must(acemq.Bytes, store)
		got := make(chan acemq.Message[[]byte], 4)
		cons, err := acemq.Consume(context.Background(), c, q, func(_ context.Context, m acemq.Message[[]byte]) acemq.Ack {
			got <- m
			return acemq.Accept()
		}, acemq.WithCodec(cc))
		if err != nil {
			t.Fatal(err)
		}
		defer closeConsumer(t, cons)

		// 1. An unframed body whose header names a stored key: the body is read, not the store.
		plain := acemq.NewPublisher[[]byte](c, "", acemq.WithCodec(acemq.Bytes))
		env := acemq.MustEnvelope(acemq.Fields{Claim: "k1"})
		if _, err := plain.Send(context.Background(), q, []byte("from the body"), acemq.WithEnvelope(env)); err != nil {
			t.Fatal(err)
		}
		m := receive(t, got)
		if string(m.Payload) != "from the body" || m.Envelope.Claim() != "k1" {
			t.Fatalf("payload %q, claim %q", m.Payload, m.Envelope.Claim())
		}

		// 2. An application-set claim travels untouched beside an offloaded payload.
		pub := acemq.NewPublisher[[]byte](c, "", acemq.WithCodec(cc))
		env = acemq.MustEnvelope(acemq.Fields{Claim: "s3://payloads/orders/o-4"})
		big := payload(70000)
		if _, err := pub.Send(context.Background(), q, big, acemq.WithEnvelope(env)); err != nil {
			t.Fatal(err)
		}
		m = receive(t, got)
		key, ok := KeyOf(m.Body)
		if !bytes.Equal(m.Payload, big) || !ok || m.Envelope.Claim() != "s3://payloads/orders/o-4" {
			t.Fatalf("payload %d bytes, key %q, claim %q", len(m.Payload), key, m.Envelope.Claim())
		}
	})
}

func TestMissingKeyIsParked(t *testing.T) {
	eachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q := sourceQueue(t, c)
		store := NewMemoryStore()
		cc := Must(acemq.Bytes, store, WithThreshold(0))
		pub := acemq.NewPublisher[[]byte](c, "", acemq.WithCodec(cc))
		sent, err := pub.Send(context.Background(), q, []byte("short-lived"))
		if err != nil {
			t.Fatal(err)
		}
		// Retention removes the payload before anyone reads it.
		if store.Len() != 1 {
			t.Fatalf("%d payloads stored", store.Len())
		}
		var key string
		for k := range store.data {
			key = k
		}
		if err := store.Delete(context.Background(), key); err != nil {
			t.Fatal(err)
		}
		var called atomic.Int32
		cons, err := acemq.Consume(context.Background(), c, q, func(context.Context, acemq.Message[[]byte]) acemq.Ack {
			called.Add(1)
			return acemq.Accept()
		}, acemq.WithCodec(cc), acemq.WithRetry(acemq.FixedRetry(3, 10*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		d := getOne(t, c, acemq.ParkedQueue(q))
		closeConsumer(t, cons)
		if called.Load() != 0 {
			t.Fatal("the handler was called for an undecodable message")
		}
		env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
		if env.ID() != sent.ID() || env.Attempt() != 1 {
			t.Fatalf("parked id %s attempt %d, want %s attempt 1 (not retried)", env.ID(), env.Attempt(), sent.ID())
		}
		reason := env.Error()
		if !strings.HasPrefix(reason, "could not be decoded: ") || !strings.Contains(reason, "no payload for key "+key) || !strings.Contains(reason, "retention") {
			t.Fatalf("x-acemq-error = %q", reason)
		}
		if k, ok := KeyOf(d.Body); !ok || k != key {
			t.Fatalf("the parked body lost its key: %q", d.Body)
		}
	})
}

// flakyStore fails the first n Gets, then answers.
type flakyStore struct {
	Store
	failures atomic.Int32
}

func (f *flakyStore) Get(ctx context.Context, key string) ([]byte, error) {
	if f.failures.Add(-1) >= 0 {
		return nil, errors.New("the store is unavailable")
	}
	return f.Store.Get(ctx, key)
}

func TestStoreFailureIsRetried(t *testing.T) {
	eachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q := sourceQueue(t, c)
		fs := &flakyStore{Store: NewMemoryStore()}
		fs.failures.Store(1)
		cc := Must(acemq.Bytes, fs)
		pub := acemq.NewPublisher[[]byte](c, "", acemq.WithCodec(cc))
		big := payload(100000)
		if _, err := pub.Send(context.Background(), q, big); err != nil {
			t.Fatal(err)
		}
		got := make(chan acemq.Message[[]byte], 1)
		cons, err := acemq.Consume(context.Background(), c, q, func(_ context.Context, m acemq.Message[[]byte]) acemq.Ack {
			got <- m
			return acemq.Accept()
		}, acemq.WithCodec(cc), acemq.WithRetry(acemq.FixedRetry(3, 20*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		defer closeConsumer(t, cons)
		m := receive(t, got)
		if !bytes.Equal(m.Payload, big) || m.Envelope.Attempt() != 2 {
			t.Fatalf("payload %d bytes on attempt %d, want the payload on attempt 2", len(m.Payload), m.Envelope.Attempt())
		}
	})
}

func TestStoreFailureExhaustsToTheDeadLetterQueue(t *testing.T) {
	eachBroker(t, func(t *testing.T, url string) {
		c := connect(t, url)
		q := sourceQueue(t, c)
		fs := &flakyStore{Store: NewMemoryStore()}
		fs.failures.Store(1 << 20)
		cc := Must(acemq.Bytes, fs, WithThreshold(0))
		pub := acemq.NewPublisher[[]byte](c, "", acemq.WithCodec(cc))
		if _, err := pub.Send(context.Background(), q, []byte("x")); err != nil {
			t.Fatal(err)
		}
		cons, err := acemq.Consume(context.Background(), c, q, func(context.Context, acemq.Message[[]byte]) acemq.Ack {
			return acemq.Accept()
		}, acemq.WithCodec(cc), acemq.WithRetry(acemq.FixedRetry(2, 10*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		d := getOne(t, c, acemq.DeadLetterQueue(q))
		closeConsumer(t, cons)
		env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
		if !strings.HasPrefix(env.Error(), "exhausted 2 attempts: ") || env.Attempt() != 2 {
			t.Fatalf("x-acemq-error %q on attempt %d", env.Error(), env.Attempt())
		}
	})
}
