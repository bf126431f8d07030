package claimcheck

import (
	"bytes"
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/retry"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRoundTripThroughABroker(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "claimcheck-test")
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
		defer brokertest.Stop(t, cons)
		pub := acemq.NewPublisher[[]byte](c, "", acemq.WithCodec(cc))
		small, big := payload(65535), payload(65536)
		for _, p := range [][]byte{small, big} {
			if _, err := pub.Send(context.Background(), q, p); err != nil {
				t.Fatal(err)
			}
		}
		m := brokertest.Receive(t, got)
		if !bytes.Equal(m.Payload, small) || len(m.Body) != 65538 || m.Body[2] != Inline {
			t.Fatalf("small: payload %d bytes, body %d bytes", len(m.Payload), len(m.Body))
		}
		if m.ContentType != "application/octet-stream" {
			t.Fatalf("content type %q, want the wrapped codec's", m.ContentType)
		}
		m = brokertest.Receive(t, got)
		if !bytes.Equal(m.Payload, big) || len(m.Body) != 39 || m.Body[2] != Stored {
			t.Fatalf("big: payload %d bytes, body %d bytes", len(m.Payload), len(m.Body))
		}
		if m.Envelope.Claim() != "" {
			t.Fatalf("the codec wrote x-acemq-claim = %q", m.Envelope.Claim())
		}
	})
}

// x-acemq-claim is the operators' business: the codec neither writes nor
// reads it (docs/wire.md §4.1).
func TestClaimHeaderIsNotTheSignal(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "claimcheck-test")
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
		defer brokertest.Stop(t, cons)

		// 1. An unframed body whose header names a stored key: the body is read, not the store.
		plain := acemq.NewPublisher[[]byte](c, "", acemq.WithCodec(acemq.Bytes))
		env := acemq.MustEnvelope(acemq.Fields{Claim: "k1"})
		if _, err := plain.Send(context.Background(), q, []byte("from the body"), acemq.WithEnvelope(env)); err != nil {
			t.Fatal(err)
		}
		m := brokertest.Receive(t, got)
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
		m = brokertest.Receive(t, got)
		key, ok := KeyOf(m.Body)
		if !bytes.Equal(m.Payload, big) || !ok || m.Envelope.Claim() != "s3://payloads/orders/o-4" {
			t.Fatalf("payload %d bytes, key %q, claim %q", len(m.Payload), key, m.Envelope.Claim())
		}
	})
}

func TestMissingKeyIsParked(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "claimcheck-test")
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
		}, acemq.WithCodec(cc), acemq.WithRetry(retry.Fixed(3, 10*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		d := brokertest.Get(t, c, contract.ParkedQueue(q))
		brokertest.Stop(t, cons)
		if called.Load() != 0 {
			t.Fatal("the handler was called for an undecodable message")
		}
		env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
		if env.ID() != sent.ID() || env.Attempt() != 1 {
			t.Fatalf("parked id %s attempt %d, want %s attempt 1 (not retried)", env.ID(), env.Attempt(), sent.ID())
		}
		reason := env.Reason()
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
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "claimcheck-test")
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
		}, acemq.WithCodec(cc), acemq.WithRetry(retry.Fixed(3, 20*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		defer brokertest.Stop(t, cons)
		m := brokertest.Receive(t, got)
		if !bytes.Equal(m.Payload, big) || m.Envelope.Attempt() != 2 {
			t.Fatalf("payload %d bytes on attempt %d, want the payload on attempt 2", len(m.Payload), m.Envelope.Attempt())
		}
	})
}

func TestStoreFailureExhaustsToTheDeadLetterQueue(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "claimcheck-test")
		fs := &flakyStore{Store: NewMemoryStore()}
		fs.failures.Store(1 << 20)
		cc := Must(acemq.Bytes, fs, WithThreshold(0))
		pub := acemq.NewPublisher[[]byte](c, "", acemq.WithCodec(cc))
		if _, err := pub.Send(context.Background(), q, []byte("x")); err != nil {
			t.Fatal(err)
		}
		cons, err := acemq.Consume(context.Background(), c, q, func(context.Context, acemq.Message[[]byte]) acemq.Ack {
			return acemq.Accept()
		}, acemq.WithCodec(cc), acemq.WithRetry(retry.Fixed(2, 10*time.Millisecond)))
		if err != nil {
			t.Fatal(err)
		}
		d := brokertest.Get(t, c, contract.DeadLetterQueue(q))
		brokertest.Stop(t, cons)
		env := acemq.ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
		if !strings.HasPrefix(env.Reason(), "exhausted 2 attempts: ") || env.Attempt() != 2 {
			t.Fatalf("x-acemq-error %q on attempt %d", env.Reason(), env.Attempt())
		}
	})
}
