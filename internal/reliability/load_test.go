package reliability

import (
	"context"
	"errors"
	"fmt"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/topology"
	"go.uber.org/goleak"
)

// A load run: producers publish numbered, confirmed messages to a durable
// queue (a quorum queue, the library's default) while a consumer with
// concurrency 4 processes them, and a fault is injected meanwhile. The run
// counts, for each message number, whether a publish of it was confirmed and
// how many times a handler saw it.
//
// A publish that fails is republished with the same envelope (the same
// message id) up to maxPublishAttempts times in all; a publish refused
// because the connection is blocked was not sent, so it is tried again
// without counting as an attempt. A message none of whose publishes was
// confirmed is "unconfirmed": it may or may not have arrived, and is not
// counted as lost. Lost is a message whose publish was confirmed and that no
// handler ever saw.

const maxPublishAttempts = 5

// seqHeader carries the message number as an application header too.
const seqHeader = "reliability-seq"

type payload struct {
	Seq int `json:"seq"`
}

type loadConfig struct {
	scenario string
	// messages to send; minSend paces the producers so that sending lasts
	// at least that long and the fault lands in the middle of it.
	messages  int
	minSend   time.Duration
	producers int
	// fault is injected while the producers send. It returns when its
	// fault is over and the broker is whole again, or when ctx (cancelled
	// once the producers are done) ends.
	fault func(ctx context.Context, r *loadRun)
	// drain bounds the wait, after sending, for every confirmed message to
	// be processed.
	drain time.Duration
	// wantRecoveries: the fault must have cost the connections and they
	// must have come back.
	wantRecoveries bool
	// queueOpts are added to the queue's declaration (the cluster
	// scenarios' WithInitialGroupSize).
	queueOpts []topology.Option
}

type loadRun struct {
	t     *testing.T
	cfg   loadConfig
	url   string
	queue string
	runID string
	prod  *acemq.Conn
	cons  *acemq.Conn
	start time.Time

	publishes   atomic.Int64 // publish calls
	republished atomic.Int64 // publishes of a message after a failed one
	refused     atomic.Int64 // publishes refused at once: the connection was blocked (how many depends on timing)
	confirmedN  atomic.Int64
	handled     atomic.Int64 // handler calls
	redelivered atomic.Int64 // handler calls with the redelivered flag
	ackFailed   atomic.Int64 // settlements whose ack failed (the broker redelivers)
	faults      atomic.Int64 // faults injected
	lostEv      atomic.Int64 // connection lost events, both connections
	recoveredEv atomic.Int64
	blockedEv   atomic.Int64
	unblockedEv atomic.Int64
	failovers   atomic.Int64 // recoveries on another endpoint than the one lost
	// faultAt is when the fault that markFault recorded struck (Unix ns),
	// firstAfter the time from it to the first confirm that followed.
	faultAt    atomic.Int64
	firstAfter atomic.Int64

	mu        sync.Mutex
	confirmed []bool
	failed    []bool // every publish of it failed
	seen      []int
	errKinds  map[string]int
	notes     []string
}

func (r *loadRun) note(format string, args ...any) {
	s := fmt.Sprintf("%6.1fs ", time.Since(r.start).Seconds()) + fmt.Sprintf(format, args...)
	r.mu.Lock()
	r.notes = append(r.notes, s)
	r.mu.Unlock()
	r.t.Log(s)
}

// markFault records the moment a fault struck, for the time to the first
// confirm after it.
func (r *loadRun) markFault() {
	r.firstAfter.Store(0)
	r.faultAt.Store(time.Now().UnixNano())
}

func (r *loadRun) onEvent(conn string) func(driver.Event) {
	var lostAt string // the endpoint lost; events of a connection come one at a time
	return func(e driver.Event) {
		switch e.Kind {
		case driver.EventLost:
			r.lostEv.Add(1)
			lostAt = e.Endpoint
		case driver.EventRecovered:
			r.recoveredEv.Add(1)
			if e.Endpoint != lostAt {
				r.failovers.Add(1)
				r.note("%s: lost %s, recovered on %s", conn, lostAt, e.Endpoint)
			}
		case driver.EventBlocked:
			r.blockedEv.Add(1)
			r.note("%s: blocked: %s", conn, e.Reason)
		case driver.EventUnblocked:
			r.unblockedEv.Add(1)
			r.note("%s: unblocked", conn)
		}
	}
}

// errKind names a failed publish's error for the figures.
func errKind(err error) string {
	var re *driver.ReturnError
	switch {
	case errors.Is(err, acemq.ErrBlocked):
		return "blocked"
	case errors.Is(err, acemq.ErrLost):
		return "lost"
	case errors.Is(err, driver.ErrConfirmTimeout):
		return "confirm-timeout"
	case errors.Is(err, driver.ErrNacked):
		return "nacked"
	case errors.As(err, &re):
		return "unroutable"
	case errors.Is(err, context.DeadlineExceeded):
		return "deadline"
	case errors.Is(err, driver.ErrClosed):
		return "closed"
	}
	return "other"
}

// runLoad runs one load scenario and returns its figures.
func runLoad(t *testing.T, url string, cfg loadConfig) *figures {
	// Registered first, so it runs last: after the connections are closed
	// and the broker restored, no goroutine of this test may be left.
	ignore := goleak.IgnoreCurrent()
	t.Cleanup(func() {
		if !t.Failed() {
			goleak.VerifyNone(t, ignore)
		}
	})
	r := &loadRun{
		t: t, cfg: cfg, url: url,
		queue:     uniqueName(cfg.scenario),
		confirmed: make([]bool, cfg.messages),
		failed:    make([]bool, cfg.messages),
		seen:      make([]int, cfg.messages),
		errKinds:  map[string]int{},
	}
	r.runID = r.queue[len(r.queue)-10:]
	deleteQueuesAtCleanup(t, url, r.queue, contract.DeadLetterQueue(r.queue), contract.ParkedQueue(r.queue))
	r.cons = connect(t, url, "acemq-reliability-consumer", acemq.WithOnConnEvent(r.onEvent("consumer")))
	r.prod = connect(t, url, "acemq-reliability-producer", acemq.WithOnConnEvent(r.onEvent("producer")))

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// Declared on the consumer's connection, so that it is declared again
	// whenever that connection recovers.
	if err := topology.New().Queue(r.queue, cfg.queueOpts...).Apply(ctx, r.cons); err != nil {
		t.Fatal(err)
	}
	r.cons.OnSettle(func(s acemq.Settlement) {
		if s.SettleErr != nil {
			r.ackFailed.Add(1)
		}
	})
	consumer, err := acemq.Consume(ctx, r.cons, r.queue, r.handle, acemq.WithConcurrency(4), acemq.WithPrefetch(50))
	if err != nil {
		t.Fatal(err)
	}

	r.start = time.Now()
	runCtx, stopRun := context.WithTimeout(context.Background(), cfg.minSend+3*time.Minute)
	defer stopRun()
	faultCtx, stopFault := context.WithCancel(runCtx)
	faultDone := make(chan struct{})
	go func() {
		defer close(faultDone)
		cfg.fault(faultCtx, r)
	}()
	r.produce(runCtx)
	sent := time.Since(r.start)
	r.note("sending done: %d confirmed of %d", r.confirmedN.Load(), cfg.messages)
	stopFault()
	<-faultDone

	// Drain: every confirmed message processed, nothing ready in the queue
	// and no handler running, twice in a row a second apart.
	stable := 0
	drained := pollFor(cfg.drain, func() bool {
		if r.missing() > 0 || consumer.InFlight() > 0 {
			stable = 0
			return false
		}
		qctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		info, err := brokertest.Driver(r.cons).InspectQueue(qctx, r.queue)
		if err != nil || info.Messages > 0 {
			stable = 0
			return false
		}
		stable++
		if stable < 2 {
			time.Sleep(time.Second)
			return false
		}
		return true
	})
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	if err := consumer.Close(cctx); err != nil {
		t.Errorf("closing the consumer: %v", err)
	}
	closeConn(t, r.prod)
	closeConn(t, r.cons)
	elapsed := time.Since(r.start)

	f := r.figures(sent, elapsed)
	f.log(t)
	lost := r.missing()
	switch {
	case lost > 0:
		t.Errorf("%d confirmed messages were never processed, for example %v", lost, r.missingSample(10))
	case !drained:
		t.Errorf("the queue did not drain within %s after sending", cfg.drain)
	}
	if r.faults.Load() == 0 {
		t.Errorf("no fault was injected: the run proves nothing")
	}
	if cfg.wantRecoveries {
		if r.lostEv.Load() == 0 {
			t.Errorf("the fault never cost a connection")
		}
		if r.recoveredEv.Load() < r.lostEv.Load() {
			t.Errorf("%d connection losses but only %d recoveries", r.lostEv.Load(), r.recoveredEv.Load())
		}
	}
	if n := r.confirmedN.Load() + int64(r.unconfirmed()); n != int64(cfg.messages) {
		t.Errorf("%d messages were confirmed or given up on, want %d: a producer did not finish", n, cfg.messages)
	}
	return f
}

func (r *loadRun) handle(_ context.Context, m acemq.Message[payload]) acemq.Ack {
	seq := m.Payload.Seq
	if seq < 0 || seq >= r.cfg.messages || m.Envelope.ID() != r.messageID(seq) {
		r.t.Errorf("a delivery that this run did not send: seq %d, id %q", seq, m.Envelope.ID())
		return acemq.Accept()
	}
	if h, _ := m.Envelope.Header(seqHeader); h != int64(seq) {
		r.t.Errorf("message %d carries %s=%v (%T)", seq, seqHeader, h, h)
	}
	r.handled.Add(1)
	if m.Redelivered {
		r.redelivered.Add(1)
	}
	r.mu.Lock()
	r.seen[seq]++
	r.mu.Unlock()
	return acemq.Accept()
}

func (r *loadRun) messageID(seq int) string { return fmt.Sprintf("rel-%s-%06d", r.runID, seq) }

// produce publishes every message, paced to last at least minSend.
func (r *loadRun) produce(ctx context.Context) {
	pub := acemq.NewPublisher[payload](r.prod, "")
	interval := r.cfg.minSend / time.Duration(r.cfg.messages)
	var next atomic.Int64
	var wg sync.WaitGroup
	for range r.cfg.producers {
		wg.Go(func() {
			for {
				seq := int(next.Add(1) - 1)
				if seq >= r.cfg.messages {
					return
				}
				if wait := time.Until(r.start.Add(time.Duration(seq) * interval)); wait > 0 {
					sleepCtx(ctx, wait)
				}
				r.send(ctx, pub, seq)
			}
		})
	}
	wg.Wait()
}

// send publishes message seq until a publish of it is confirmed, the
// attempts run out or ctx ends.
func (r *loadRun) send(ctx context.Context, pub *acemq.Publisher[payload], seq int) {
	env := acemq.MustEnvelope(acemq.Fields{ID: r.messageID(seq), Headers: map[string]any{seqHeader: int64(seq)}})
	attempts := 0
	for ctx.Err() == nil {
		pctx, cancel := context.WithTimeout(ctx, 30*time.Second)
		blockedBefore, _ := r.prod.Blocked()
		_, err := pub.Send(pctx, r.queue, payload{Seq: seq}, acemq.WithEnvelope(env))
		blockedAfter, _ := r.prod.Blocked()
		cancel()
		r.publishes.Add(1)
		if blockedBefore && blockedAfter && !errors.Is(err, acemq.ErrBlocked) {
			// The connection was blocked for the whole call (a run has
			// one alarm at most: blocked, then unblocked once): the
			// publish must have been refused before sending, whatever
			// the scheduler allowed meanwhile.
			r.t.Errorf("publish of message %d while the connection was blocked: %v, want an error wrapping ErrBlocked", seq, err)
		}
		if err == nil {
			r.mu.Lock()
			r.confirmed[seq] = true
			r.mu.Unlock()
			r.confirmedN.Add(1)
			if at := r.faultAt.Load(); at != 0 && r.firstAfter.Load() == 0 {
				r.firstAfter.CompareAndSwap(0, time.Now().UnixNano()-at)
			}
			return
		}
		kind := errKind(err)
		r.mu.Lock()
		r.errKinds[kind]++
		first := r.errKinds[kind] == 1
		r.mu.Unlock()
		if first {
			r.note("first %q publish failure: %v", kind, err)
		}
		if kind == "other" {
			// A connection fault must surface as lost (may or may not have
			// arrived), refused, timed out or nacked, never as an error a
			// producer would take for a bad message and drop.
			r.t.Errorf("publish of message %d failed with an unclassified error: %v", seq, err)
		}
		if kind == "blocked" {
			// Refused before sending: nothing is on the broker. Wait and
			// try again; this is not a spent attempt.
			r.refused.Add(1)
			sleepCtx(ctx, 100*time.Millisecond)
			continue
		}
		attempts++
		if attempts >= maxPublishAttempts {
			break
		}
		r.republished.Add(1)
		sleepCtx(ctx, 100*time.Millisecond)
	}
	r.mu.Lock()
	r.failed[seq] = true
	r.mu.Unlock()
}

// missing counts confirmed messages no handler has seen yet.
func (r *loadRun) missing() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i, c := range r.confirmed {
		if c && r.seen[i] == 0 {
			n++
		}
	}
	return n
}

func (r *loadRun) missingSample(max int) []int {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []int
	for i, c := range r.confirmed {
		if c && r.seen[i] == 0 && len(out) < max {
			out = append(out, i)
		}
	}
	return out
}

func (r *loadRun) unconfirmed() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for i, f := range r.failed {
		if f && !r.confirmed[i] {
			n++
		}
	}
	return n
}

func (r *loadRun) figures(sending, elapsed time.Duration) *figures {
	r.mu.Lock()
	delivered, duplicated, unconfirmedDelivered, unconfirmed := 0, 0, 0, 0
	for i, n := range r.seen {
		if n > 0 {
			delivered++
			duplicated += n - 1
		}
		if r.failed[i] && !r.confirmed[i] {
			unconfirmed++
			if n > 0 {
				unconfirmedDelivered++
			}
		}
	}
	kinds := make([]string, 0, len(r.errKinds))
	for k, n := range r.errKinds {
		kinds = append(kinds, fmt.Sprintf("%s:%d", k, n))
	}
	r.mu.Unlock()
	sort.Strings(kinds)
	errs := strings.Join(kinds, ",")
	if errs == "" {
		errs = "none"
	}
	lost := r.missing()
	firstAfter := "n/a"
	if d := r.firstAfter.Load(); d > 0 {
		firstAfter = fmt.Sprintf("%.2fs", time.Duration(d).Seconds())
	}
	return newFigures(r.cfg.scenario).
		add("sent", r.cfg.messages).
		add("publishes", r.publishes.Load()).
		add("confirmed", r.confirmedN.Load()).
		add("unconfirmed", unconfirmed).
		add("unconfirmed_delivered", unconfirmedDelivered).
		add("delivered", delivered).
		add("lost", lost).
		add("duplicated", duplicated).
		add("redelivered", r.redelivered.Load()).
		add("ack_failed", r.ackFailed.Load()).
		add("republished", r.republished.Load()).
		add("refused", r.refused.Load()).
		add("publish_errors", errs).
		add("faults", r.faults.Load()).
		add("conn_lost", r.lostEv.Load()).
		add("recoveries", r.recoveredEv.Load()).
		add("failovers", r.failovers.Load()).
		add("first_confirm_after_fault", firstAfter).
		add("blocked", r.blockedEv.Load()).
		add("sending", sending).
		add("time", elapsed)
}

// loadSize is the number of messages and the minimum sending time: a few
// thousand for CI, 20,000 with ACEMQ_RELIABILITY_FULL=1.
func loadSize() (int, time.Duration) {
	if full() {
		return 20000, 30 * time.Second
	}
	return 3000, 10 * time.Second
}
