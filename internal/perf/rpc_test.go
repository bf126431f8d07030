package perf

import (
	"context"
	"encoding/json"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/rpc"
)

// The responder's shape, the same on both sides.
const (
	rpcCallers        = 32
	rpcResponderConc  = 8
	rpcRequestTimeout = 30 * time.Second
)

// BenchmarkRPC compares request/reply through a classic request queue,
// b.N calls per run, each carrying the 256-byte JSON Order and answered
// with it.
//
//   - seq: one caller, one call at a time; reports the p50 and p99 round
//     trip.
//   - c32: 32 callers at once; reports calls/s (as msgs/s).
//
// In both, rawhdr is raw writing, on the request and on the reply, a fresh
// header table of the fields acemq writes there: raw doing the same work,
// which the targets are measured against; raw (bare bodies) is for
// reference, what the envelopes cost amqp091 and the broker.
//
// Requester and responder have a connection each. raw mirrors what rpc
// does: the request is published persistent, mandatory and confirmed with
// reply-to and correlation-id to the request queue; the caller waits for
// both the confirm and the reply, which arrives on an exclusive,
// auto-delete reply queue read with manual acks at prefetch 20
// (RawReplyPrefetch, what rpc.Open's reply consumer uses). The
// responder reads the request queue at prefetch 200 with 8 goroutines,
// decodes the request, publishes the answer (confirmed, not mandatory) to
// the reply-to queue, waits for that confirm and acks. acemq uses
// rpc.Open and Requester.Ask against rpc.Serve with WithConcurrency(8) and
// WithPrefetch(200). The raw sides are RawRequester and RawResponder, which
// `acemq bench --compare-raw` measures against too.
//
// c32 has two more sides, for reference, that split the gap between
// rawhdr and acemq into its halves: asker is rpc.Requester against a
// RawResponder writing the same headers, server a RawRequester writing
// the same headers against rpc.Serve.
func BenchmarkRPC(b *testing.B) {
	url := brokerURL(b)
	b.Run("seq", func(b *testing.B) {
		compare(b,
			side{"raw", func(b *testing.B) { runRPC(b, 1, newRawRPC(b, url, false)) }},
			side{"rawhdr", func(b *testing.B) { runRPC(b, 1, newRawRPC(b, url, true)) }},
			side{"acemq", func(b *testing.B) { runRPC(b, 1, newAcemqRPC(b, url)) }})
	})
	b.Run("c32", func(b *testing.B) {
		compare(b,
			side{"raw", func(b *testing.B) { runRPC(b, rpcCallers, newRawRPC(b, url, false)) }},
			side{"rawhdr", func(b *testing.B) { runRPC(b, rpcCallers, newRawRPC(b, url, true)) }},
			side{"asker", func(b *testing.B) { runRPC(b, rpcCallers, newHalfRPC(b, url, true)) }},
			side{"server", func(b *testing.B) { runRPC(b, rpcCallers, newHalfRPC(b, url, false)) }},
			side{"acemq", func(b *testing.B) { runRPC(b, rpcCallers, newAcemqRPC(b, url)) }})
	})
	// c32at2k: c32 with the 32 callers together held to 2,000 calls a
	// second, for client CPU per call at the same pace.
	b.Run("c32at2k", func(b *testing.B) {
		compare(b,
			side{"rawhdr", func(b *testing.B) { runRPCPaced(b, rpcCallers, rpcPacedRate, newRawRPC(b, url, true)) }},
			side{"acemq", func(b *testing.B) { runRPCPaced(b, rpcCallers, rpcPacedRate, newAcemqRPC(b, url)) }})
	})
}

// rpcPacedRate is the calls per second of the paced request/reply row.
const rpcPacedRate = 2000

// asker makes one call.
type asker func(ctx context.Context, o Order) (Order, error)

func runRPC(b *testing.B, callers int, ask asker) { runRPCPaced(b, callers, 0, ask) }

// runRPCPaced makes b.N calls from callers goroutines, held to rate calls
// a second (0: as fast as they go).
func runRPCPaced(b *testing.B, callers, rate int, ask asker) {
	ctx := ctxFor(b, 10*time.Minute)
	order := NewOrderCached()
	// One call before timing: the first round trip sets up what the broker
	// and the runtime set up lazily.
	if _, err := ask(ctx, order); err != nil {
		b.Fatal(err)
	}
	var lat Latencies
	var next atomic.Int64
	var wg sync.WaitGroup
	b.ReportAllocs()
	b.ResetTimer()
	m := startMeter()
	pace := newPacer(rate)
	for range callers {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > int64(b.N) {
					return
				}
				pace.wait(int(i))
				t0 := time.Now()
				if _, err := ask(ctx, order); err != nil {
					b.Error(err)
					return
				}
				lat.Since(t0)
			}
		})
	}
	wg.Wait()
	m.Stop(b, b.N)
	sum := lat.Summary()
	b.ReportMetric(float64(sum.P50.Nanoseconds())/1e3, "p50-µs")
	b.ReportMetric(float64(sum.P99.Nanoseconds())/1e3, "p99-µs")
}

func newAcemqRPC(b *testing.B, url string) asker {
	q := declare(b, url, classic)
	acemqResponder(b, url, q)
	return acemqRequester(b, url, q)
}

// newRawRPC starts a raw responder (RawResponder) and returns a raw
// requester's call (RawRequester); with headers, both write the header
// tables acemq writes.
func newRawRPC(b *testing.B, url string, headers bool) asker {
	q := declare(b, url, classic)
	var env *EnvelopeTable
	if headers {
		env = rpcEnvelope()
	}
	rawResponder(b, url, q, env)
	return rawRequester(b, url, q, env)
}

// newHalfRPC is one half acemq and the other raw writing the same headers:
// with acemqAsks, rpc.Requester against a RawResponder, else a
// RawRequester against rpc.Serve. For reference: which half a gap
// between rawhdr and acemq is in.
func newHalfRPC(b *testing.B, url string, acemqAsks bool) asker {
	q := declare(b, url, classic)
	if acemqAsks {
		rawResponder(b, url, q, rpcEnvelope())
		return acemqRequester(b, url, q)
	}
	acemqResponder(b, url, q)
	return rawRequester(b, url, q, rpcEnvelope())
}

// rpcEnvelope is the header table the raw halves write: what acemq's
// requester and responder write.
func rpcEnvelope() *EnvelopeTable { return Envelope{Origin: FullEnvelope.Origin}.Prepare() }

// acemqResponder serves q with rpc.Serve on a connection of its own,
// echoing the request.
func acemqResponder(b *testing.B, url, q string) {
	server := connect(b, url)
	resp, err := rpc.Serve(ctxFor(b, time.Minute), server, q, func(_ context.Context, m acemq.Message[Order]) (Order, error) {
		return m.Payload, nil
	}, acemq.WithConcurrency(rpcResponderConc), acemq.WithPrefetch(prefetch), acemq.WithDeclarations(false))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = resp.Close(context.Background()) })
}

// acemqRequester opens an rpc.Requester of q on a connection of its own.
func acemqRequester(b *testing.B, url, q string) asker {
	client := connect(b, url)
	req, err := rpc.Open[Order, Order](ctxFor(b, time.Minute), client, "", q, rpc.WithTimeout(rpcRequestTimeout))
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = req.Close(context.Background()) })
	return func(ctx context.Context, o Order) (Order, error) { return req.Ask(ctx, o) }
}

// rawResponder serves q with a RawResponder (env's headers on every reply
// when env is not nil), echoing the request.
func rawResponder(b *testing.B, url, q string, env *EnvelopeTable) {
	resp, err := StartRawResponder(dialRaw(b, url), RawResponderConfig{
		Queue: q, Prefetch: prefetch, Handlers: rpcResponderConc, Envelope: env,
		Answer: func(body []byte) ([]byte, error) {
			var o Order
			if err := json.Unmarshal(body, &o); err != nil {
				return nil, err
			}
			return json.Marshal(o)
		},
	})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = resp.Close() })
}

// rawRequester returns a RawRequester's call of q (env's headers on every
// request when env is not nil).
func rawRequester(b *testing.B, url, q string, env *EnvelopeTable) asker {
	req, err := NewRawRequester(dialRaw(b, url), "", q, env)
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = req.Close() })
	return func(ctx context.Context, o Order) (Order, error) {
		body, err := json.Marshal(o)
		if err != nil {
			return Order{}, err
		}
		reply, err := req.Ask(ctx, "application/json", body, rpcRequestTimeout)
		if err != nil {
			return Order{}, err
		}
		var rep Order
		return rep, json.Unmarshal(reply, &rep)
	}
}
