package acemq_test

import (
	"context"
	"errors"
	"iter"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
)

// numbered yields n messages to q, message i with payload i and the id
// "<prefix>-i", and counts in *yielded how many it has yielded.
func numbered(q, prefix string, n int, yielded *int) iter.Seq[acemq.Outgoing[int]] {
	return func(yield func(acemq.Outgoing[int]) bool) {
		for i := range n {
			env := acemq.MustEnvelope(acemq.Fields{ID: prefix + "-" + strconv.Itoa(i)})
			*yielded++
			if !yield(acemq.Outgoing[int]{RoutingKey: q, Payload: i, Envelope: env}) {
				return
			}
		}
	}
}

// TestSendSeq: a sequence many times longer than the confirm window is
// published whole from one goroutine; each message's result is reported
// once, in order, with its envelope; and SendSeq never takes more than a
// window of messages ahead of their results (what it holds in memory is
// bounded, whatever the sequence's length).
func TestSendSeq(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		const window, n = 8, 300
		c := brokertest.Connect(t, url, acemq.WithMaxOutstanding(window))
		q := brokertest.Queue(t, c, "seq")
		p := acemq.NewPublisher[int](c, "")
		ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
		defer cancel()
		yielded, reported, ahead := 0, 0, 0
		err := p.SendSeq(ctx, numbered(q, "seq", n, &yielded), func(r acemq.SendResult) {
			ahead = max(ahead, yielded-reported)
			if want := "seq-" + strconv.Itoa(reported); r.Err != nil || r.Envelope.ID() != want {
				t.Errorf("result %d: %s, %v; want %s, confirmed", reported, r.Envelope.ID(), r.Err, want)
			}
			reported++
		})
		if err != nil {
			t.Fatalf("SendSeq of %d: %v", n, err)
		}
		if reported != n {
			t.Fatalf("%d results for %d messages", reported, n)
		}
		// A window awaiting confirms, the message being published and the
		// one just yielded.
		if ahead > window+2 {
			t.Errorf("SendSeq took %d messages ahead of their results; the window is %d", ahead, window)
		}
		testenv.Eventually(t, "every message on the queue", func() bool { return brokertest.Depth(t, c, q) == n })
		for i := range 3 {
			d := brokertest.Get(t, c, q)
			if want := "seq-" + strconv.Itoa(i); d.MessageID != want || string(d.Body) != strconv.Itoa(i) {
				t.Errorf("message %d on the queue: %s %s, want %s %d", i, d.MessageID, d.Body, want, i)
			}
		}
	})
}

// TestSendSeqFailuresStayAlone: an unencodable payload, one an interceptor
// refuses and one nothing routes each fail alone, reported in their places;
// SendSeq returns a *BatchError counting them, with no Results (they went
// to the callback), and a nil callback is allowed.
func TestSendSeqFailuresStayAlone(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		refuse := errors.New("not this one")
		c := brokertest.Connect(t, url, acemq.WithPublishInterceptors(func(_ context.Context, p *acemq.Publishing) error {
			if string(p.Body) == `"refused"` {
				return refuse
			}
			return nil
		}))
		q := brokertest.Queue(t, c, "seqalone")
		p := acemq.NewPublisher[any](c, "")
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		msgs := func(yield func(acemq.Outgoing[any]) bool) {
			for _, o := range []acemq.Outgoing[any]{
				{RoutingKey: q, Payload: "first"},
				{RoutingKey: q, Payload: make(chan int)},
				{RoutingKey: q, Payload: "refused"},
				{RoutingKey: q + "-nobody", Payload: "unroutable"},
				{RoutingKey: q, Payload: "last"},
			} {
				if !yield(o) {
					return
				}
			}
		}
		var rs []acemq.SendResult
		err := p.SendSeq(ctx, msgs, func(r acemq.SendResult) { rs = append(rs, r) })
		var be *acemq.BatchError
		if !errors.As(err, &be) || be.Total != 5 || be.Failed != 3 || be.Confirmed != 2 || be.Results != nil {
			t.Fatalf("SendSeq: %v (%+v)", err, be)
		}
		if len(rs) != 5 {
			t.Fatalf("%d results for 5 messages", len(rs))
		}
		var ue *driver.ReturnError
		switch {
		case rs[0].Err != nil || rs[4].Err != nil:
			t.Errorf("the good messages failed: %v, %v", rs[0].Err, rs[4].Err)
		case rs[1].Err == nil || !strings.Contains(rs[1].Err.Error(), "cannot encode"):
			t.Errorf("the unencodable payload: %v", rs[1].Err)
		case !errors.Is(rs[2].Err, refuse):
			t.Errorf("the refused message: %v", rs[2].Err)
		case !errors.As(rs[3].Err, &ue):
			t.Errorf("the unroutable message: %v", rs[3].Err)
		case !errors.Is(be.First, rs[1].Err):
			t.Errorf("the first failure is %v, want the unencodable payload's", be.First)
		}
		for _, i := range []int{0, 4} {
			if d := brokertest.Get(t, c, q); d.MessageID != rs[i].Envelope.ID() {
				t.Errorf("the queue holds %s (%s), want message %d (%s)", d.MessageID, d.Body, i, rs[i].Envelope.ID())
			}
		}
		if err := p.SendSeq(ctx, msgs, nil); !errors.As(err, &be) || be.Failed != 3 {
			t.Errorf("SendSeq without a callback: %v", err)
		}
	})
}

// TestSendSeqStopsWhenTheContextEnds: an endless sequence is published
// until ctx ends; then SendSeq stops taking messages (the sequence's loop
// ends), reports every message it took, and returns an error wrapping ctx's.
func TestSendSeqStopsWhenTheContextEnds(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "seqcancel")
		p := acemq.NewPublisher[int](c, "")
		ctx, cancel := context.WithCancel(context.Background())
		defer cancel()
		yielded, reported, confirmed, ended := 0, 0, 0, false
		endless := func(yield func(acemq.Outgoing[int]) bool) {
			defer func() { ended = true }()
			for i := 0; ; i++ {
				yielded++
				if !yield(acemq.Outgoing[int]{RoutingKey: q, Payload: i}) {
					return
				}
			}
		}
		err := p.SendSeq(ctx, endless, func(r acemq.SendResult) {
			reported++
			if r.Err == nil {
				confirmed++
			}
			if confirmed == 50 {
				cancel()
			}
		})
		switch {
		case !errors.Is(err, context.Canceled):
			t.Fatalf("SendSeq returned %v, want an error wrapping context.Canceled", err)
		case !ended:
			t.Fatal("the sequence's loop did not end")
		case reported != yielded:
			t.Fatalf("%d messages taken, %d reported", yielded, reported)
		case confirmed < 50:
			t.Fatalf("%d confirmed before ctx ended, want 50", confirmed)
		}
		// What was confirmed is on the queue.
		testenv.Eventually(t, "the confirmed messages on the queue", func() bool { return brokertest.Depth(t, c, q) >= confirmed })
	})
}

// TestSendSeqWhilePaused: SendSeq waits at a paused publisher before each
// message and goes on when it is resumed; a ctx that ends while it waits
// fails it with an error wrapping ErrPaused, and the message it was about
// to send is reported as not sent.
func TestSendSeqWhilePaused(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		c := brokertest.Connect(t, url)
		q := brokertest.Queue(t, c, "seqpause")
		p := acemq.NewPublisher[int](c, "")
		p.Pause()
		ctx, cancel := context.WithTimeout(context.Background(), 100*time.Millisecond)
		defer cancel()
		yielded := 0
		var rs []acemq.SendResult
		err := p.SendSeq(ctx, numbered(q, "paused", 5, &yielded), func(r acemq.SendResult) { rs = append(rs, r) })
		if !errors.Is(err, acemq.ErrPaused) || len(rs) != 1 || !errors.Is(rs[0].Err, acemq.ErrPaused) {
			t.Fatalf("SendSeq on a paused publisher: %v, results %+v", err, rs)
		}
		if d := brokertest.Depth(t, c, q); d != 0 {
			t.Fatalf("a paused publisher sent %d messages", d)
		}

		done := make(chan error, 1)
		yielded = 0
		go func() {
			done <- p.SendSeq(context.Background(), numbered(q, "resumed", 5, new(int)), nil)
		}()
		select {
		case err := <-done:
			t.Fatalf("SendSeq returned while the publisher was paused: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
		p.Resume()
		if err := brokertest.Receive(t, done); err != nil {
			t.Fatalf("SendSeq after Resume: %v", err)
		}
		testenv.Eventually(t, "5 messages on the queue", func() bool { return brokertest.Depth(t, c, q) == 5 })
	})
}

// TestSendSeqOnACoreOnlyDriver: on a driver without driver.EachPublisher
// SendSeq publishes one message at a time, with the same results.
func TestSendSeqOnACoreOnlyDriver(t *testing.T) {
	url := brokertest.MemoryURL(t)
	c := brokertest.Connect(t, strings.Replace(url, "memory://", "coreonly://", 1))
	if err := c.Raw(func(dc driver.Conn) error {
		if _, ok := dc.(driver.EachPublisher); ok {
			t.Fatal("the core-only driver implements driver.EachPublisher")
		}
		_, err := dc.DeclareQueue(context.Background(), driver.Queue{Name: "q", Durable: true})
		return err
	}); err != nil {
		t.Fatal(err)
	}
	p := acemq.NewPublisher[int](c, "")
	yielded, reported := 0, 0
	err := p.SendSeq(context.Background(), numbered("q", "core", 20, &yielded), func(r acemq.SendResult) {
		if want := "core-" + strconv.Itoa(reported); r.Err != nil || r.Envelope.ID() != want {
			t.Errorf("result %d: %s, %v", reported, r.Envelope.ID(), r.Err)
		}
		if yielded != reported+1 {
			t.Errorf("result %d reported with %d messages taken", reported, yielded)
		}
		reported++
	})
	if err != nil || reported != 20 {
		t.Fatalf("SendSeq: %v, %d results", err, reported)
	}
	reader := brokertest.Connect(t, url)
	if d := brokertest.Get(t, reader, "q"); d.MessageID != "core-0" {
		t.Errorf("the first message on the queue is %s", d.MessageID)
	}
}

// TestSendSeqWithABadOption: a publisher whose options were wrong returns
// that mistake and takes nothing from the sequence.
func TestSendSeqWithABadOption(t *testing.T) {
	c := brokertest.Connect(t, brokertest.MemoryURL(t))
	p := acemq.NewPublisher[int](c, "", acemq.WithCodec(nil))
	taken := false
	err := p.SendSeq(context.Background(), func(func(acemq.Outgoing[int]) bool) { taken = true }, nil)
	if err == nil || taken {
		t.Fatalf("SendSeq with WithCodec(nil): %v, sequence taken: %v", err, taken)
	}
}

// TestSendSeqAfterAPanic: a sequence that panics while its publishes await
// their confirms leaves the connection whole: the panic reaches the caller,
// and the permits of those publishes come back, so the next Send does not
// wait for a permit until the confirm timeout.
func TestSendSeqAfterAPanic(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		const window = 4
		c := brokertest.Connect(t, url, acemq.WithMaxOutstanding(window), acemq.WithConfirmTimeout(20*time.Second))
		q := brokertest.Queue(t, c, "seqpanic")
		p := acemq.NewPublisher[int](c, "")
		boom := errors.New("the sequence failed")
		func() {
			defer func() {
				if r := recover(); r != boom {
					t.Fatalf("recovered %v, want the sequence's panic", r)
				}
			}()
			_ = p.SendSeq(context.Background(), func(yield func(acemq.Outgoing[int]) bool) {
				for i := range window {
					if !yield(acemq.Outgoing[int]{RoutingKey: q, Payload: i}) {
						return
					}
				}
				panic(boom)
			}, nil)
		}()
		for i := range 2 * window {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			_, err := p.Send(ctx, q, 100+i)
			cancel()
			if err != nil {
				t.Fatalf("Send %d after the panic: %v", i, err)
			}
		}
	})
}

// TestSendSeqWaitingLeavesTheWindow: while a sequence waits for its next
// message, its confirmed messages do not keep their places in the
// connection's window: another goroutine's Send goes at once, though the
// results of those messages are reported only when the sequence moves on.
// Before, the Send waited for a place until its context ended.
func TestSendSeqWaitingLeavesTheWindow(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		const window = 4
		c := brokertest.Connect(t, url, acemq.WithMaxOutstanding(window), acemq.WithConfirmTimeout(20*time.Second))
		q := brokertest.Queue(t, c, "seqwait")
		p := acemq.NewPublisher[int](c, "")
		waiting, resume := make(chan struct{}), make(chan struct{})
		reported := 0
		done := make(chan error, 1)
		go func() {
			done <- p.SendSeq(context.Background(), func(yield func(acemq.Outgoing[int]) bool) {
				for i := range 2 * window {
					if i == window {
						close(waiting)
						<-resume // the source has nothing ready
					}
					if !yield(acemq.Outgoing[int]{RoutingKey: q, Payload: i}) {
						return
					}
				}
			}, func(r acemq.SendResult) {
				if r.Err != nil {
					t.Errorf("result %d: %v", reported, r.Err)
				}
				reported++
			})
		}()
		<-waiting
		testenv.Eventually(t, "the sequence's first messages on the queue", func() bool { return brokertest.Depth(t, c, q) == window })
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		_, err := p.Send(ctx, q, -1)
		cancel()
		close(resume)
		if err != nil {
			t.Fatalf("a Send while the sequence waited: %v", err)
		}
		if err := brokertest.Receive(t, done); err != nil {
			t.Fatalf("SendSeq: %v", err)
		}
		if reported != 2*window {
			t.Fatalf("%d results for %d messages", reported, 2*window)
		}
		testenv.Eventually(t, "every message on the queue", func() bool { return brokertest.Depth(t, c, q) == 2*window+1 })
	})
}

// TestSendSeqBesideSends: a sequence and goroutines calling Send share a
// small window; Sends short of a place take back those of the sequence's
// confirmed messages. Every message of both is confirmed once, and nothing
// waits for a place that never comes back.
func TestSendSeqBesideSends(t *testing.T) {
	brokertest.Each(t, func(t *testing.T, url string) {
		const window, seqN, senders, perSender = 4, 400, 4, 50
		c := brokertest.Connect(t, url, acemq.WithMaxOutstanding(window))
		q := brokertest.Queue(t, c, "seqbeside")
		p := acemq.NewPublisher[int](c, "")
		ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
		defer cancel()
		errs := make(chan error, senders+1)
		go func() {
			errs <- p.SendSeq(ctx, numbered(q, "beside", seqN, new(int)), nil)
		}()
		for s := range senders {
			go func() {
				for i := range perSender {
					if _, err := p.Send(ctx, q, 1000*(s+1)+i); err != nil {
						errs <- err
						return
					}
				}
				errs <- nil
			}()
		}
		for range senders + 1 {
			if err := brokertest.Receive(t, errs); err != nil {
				t.Fatal(err)
			}
		}
		testenv.Eventually(t, "every message on the queue", func() bool { return brokertest.Depth(t, c, q) == seqN+senders*perSender })
	})
}
