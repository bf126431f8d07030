package rpc_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/rpc"
)

// 2. The fast-responder race: the requester's publish does not return until
// the reply has been delivered to the requester and acked. A waiter
// registered after the publish would miss it; the call must still be
// answered.
func TestFastResponderRace(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		var mu sync.Mutex
		acked := map[string]chan struct{}{}
		signal := func(corr string) chan struct{} {
			mu.Lock()
			defer mu.Unlock()
			ch, ok := acked[corr]
			if !ok {
				ch = make(chan struct{})
				acked[corr] = ch
			}
			return ch
		}
		var replyFirst, published int
		h := &hooks{
			acked: func(d driver.Delivery) { close(signal(d.CorrelationID)) },
			publish: func(m driver.Message, send func() error) error {
				if err := send(); err != nil || m.ReplyTo == "" {
					return err
				}
				// A request: hold the publish until its reply has been
				// handled and acked by the requester's consumer.
				select {
				case <-signal(m.CorrelationID):
					mu.Lock()
					replyFirst++
					mu.Unlock()
				case <-time.After(10 * time.Second):
				}
				mu.Lock()
				published++
				mu.Unlock()
				return nil
			},
		}
		caller := e.connectHooked(h)
		q := e.queue("prices")
		serve(t, e.connect(), q, price)
		r := open[priceRequest, quote](t, caller, "", q, rpc.WithTimeout(time.Minute))
		for range 10 {
			got, err := r.Ask(bg, priceRequest{SKU: "AB"})
			if err != nil || got.Pence != 200 {
				t.Fatalf("Ask = %+v, %v", got, err)
			}
		}
		mu.Lock()
		defer mu.Unlock()
		if replyFirst != 10 || published != 10 {
			t.Fatalf("only %d of %d replies arrived before their publish returned: the race was not exercised", replyFirst, published)
		}
		if r.Unmatched() != 0 {
			t.Fatalf("Unmatched() = %d", r.Unmatched())
		}
	})
}

// 2. A thousand concurrent calls on one requester, each answered with its
// own reply (run under -race; goleak checks nothing is left running).
func TestThousandConcurrentAsks(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		conn := e.connect()
		q := e.queue("echo")
		responder := serve(t, conn, q, func(_ context.Context, m acemq.Message[int]) (int, error) {
			return m.Payload * 2, nil
		}, acemq.WithConcurrency(8), acemq.WithPrefetch(50))
		r := open[int, int](t, conn, "", q)
		const n = 1000
		start := time.Now()
		var wg sync.WaitGroup
		errs := make(chan error, n)
		for i := range n {
			wg.Go(func() {
				got, err := r.Ask(bg, i)
				if err == nil && got != 2*i {
					err = fmt.Errorf("asked %d, got %d", i, got)
				}
				if err != nil {
					errs <- err
				}
			})
		}
		wg.Wait()
		elapsed := time.Since(start)
		close(errs)
		for err := range errs {
			t.Error(err)
		}
		if responder.Answered() != n || r.Outstanding() != 0 || r.Unmatched() != 0 || r.TimedOut() != 0 {
			t.Fatalf("Answered %d Outstanding %d Unmatched %d TimedOut %d", responder.Answered(), r.Outstanding(), r.Unmatched(), r.TimedOut())
		}
		t.Logf("%d concurrent asks answered in %s (%.0f/s)", n, elapsed.Round(time.Millisecond), n/elapsed.Seconds())
	})
}

// stalling is a handler that reports it started and then holds the request
// until its consumer gives up on the drain and cancels it.
func stalling(started chan<- struct{}) rpc.Handler[priceRequest, quote] {
	return func(ctx context.Context, _ acemq.Message[priceRequest]) (quote, error) {
		started <- struct{}{}
		<-ctx.Done()
		return quote{}, ctx.Err()
	}
}

// A responder killed while a request is in flight (its connection closed):
// the request is redelivered to another responder and the call is answered.
func TestResponderKilledRequestRedelivered(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		q := e.queue("prices")
		caller := e.connect()
		r := open[priceRequest, quote](t, caller, "", q, rpc.WithTimeout(time.Minute))

		doomedConn := e.connect()
		started := make(chan struct{}, 1)
		doomed := serve(t, doomedConn, q, stalling(started), acemq.WithDrainTimeout(50*time.Millisecond))

		type answer struct {
			q   quote
			err error
		}
		done := make(chan answer, 1)
		go func() {
			got, err := r.Ask(bg, priceRequest{SKU: "A"})
			done <- answer{got, err}
		}()
		<-started
		survivor := serve(t, e.connect(), q, func(context.Context, acemq.Message[priceRequest]) (quote, error) {
			return quote{Pence: 42}, nil
		})
		var de *acemq.DrainError
		if err := doomedConn.Close(bg); !errors.As(err, &de) {
			t.Logf("closing the doomed connection: %v", err)
		}
		a := <-done
		if a.err != nil || a.q.Pence != 42 {
			t.Fatalf("Ask = %+v, %v; want the survivor's answer", a.q, a.err)
		}
		if doomed.Answered() != 0 || survivor.Answered() != 1 {
			t.Fatalf("doomed answered %d, survivor %d", doomed.Answered(), survivor.Answered())
		}
		if r.Unmatched() != 0 {
			t.Fatalf("Unmatched() = %d: the killed responder sent a reply", r.Unmatched())
		}
		if n := e.depth(contract.DeadLetterQueue(q)); n != 0 {
			t.Fatalf("%d copies of the request were dead-lettered by the killed responder", n)
		}
	})
}

// A responder closed while a request is in flight, with nobody else
// serving: the call times out with the timeout error, and the request is
// not lost: it is back on the queue and a later responder answers it.
func TestResponderKilledRequestNotLost(t *testing.T) {
	each(t, func(t *testing.T, e *env) {
		q := e.queue("prices")
		conn := e.connect()
		r := open[priceRequest, quote](t, conn, "", q)
		started := make(chan struct{}, 1)
		doomed := serve(t, conn, q, stalling(started), acemq.WithDrainTimeout(50*time.Millisecond))
		done := make(chan error, 1)
		go func() {
			_, err := r.Ask(bg, priceRequest{SKU: "A"}, rpc.WithTimeout(500*time.Millisecond))
			done <- err
		}()
		<-started
		_ = doomed.Close(bg)
		if err := <-done; !errors.Is(err, rpc.ErrTimeout) || !errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("Ask = %v; want the timeout error", err)
		}
		testenv.Eventually(t, "the request to be back on its queue", func() bool { return e.depth(q) == 1 })
		later := serve(t, e.connect(), q, price)
		testenv.Eventually(t, "the late answer", func() bool { return r.Unmatched() == 1 })
		if later.Answered() != 1 {
			t.Fatalf("the later responder answered %d", later.Answered())
		}
		if n := e.depth(contract.DeadLetterQueue(q)); n != 0 {
			t.Fatalf("%d copies of the request were dead-lettered by the killed responder", n)
		}
	})
}
