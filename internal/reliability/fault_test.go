package reliability

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/brokertest"
)

// These scenarios hurt the broker for everyone using it: they run only with
// ACEMQ_TEST_FAULTS=1, alone (go test -p 1 -run '^TestFault'), and restore
// the broker at cleanup even when they fail.

// TestFaultConnectionsKilled: every connection is closed by the broker every
// 2 seconds while the producers send and the consumer processes. Every
// confirmed message must be processed at least once.
func TestFaultConnectionsKilled(t *testing.T) {
	url := faults(t)
	n, minSend := loadSize()
	runLoad(t, url, loadConfig{
		scenario:       "connections-killed",
		messages:       n,
		minSend:        minSend,
		producers:      8,
		drain:          90 * time.Second,
		wantRecoveries: true,
		fault: func(ctx context.Context, r *loadRun) {
			tick := time.NewTicker(2 * time.Second)
			defer tick.Stop()
			for {
				select {
				case <-ctx.Done():
					return
				case <-tick.C:
				}
				if _, err := rabbitmqctl("close_all_connections", "acemq reliability: connections killed"); err != nil {
					r.t.Errorf("%v", err)
					return
				}
				r.faults.Add(1)
			}
		},
	})
}

// TestFaultBrokerRestarted: the broker's application is stopped and started
// again while the producers send and the consumer processes.
func TestFaultBrokerRestarted(t *testing.T) {
	url := faults(t)
	n, minSend := loadSize()
	runLoad(t, url, loadConfig{
		scenario:       "broker-restarted",
		messages:       n,
		minSend:        minSend,
		producers:      8,
		drain:          120 * time.Second,
		wantRecoveries: true,
		fault: func(ctx context.Context, r *loadRun) {
			// In the middle: once a third of the messages are confirmed.
			for r.confirmedN.Load() < int64(n/3) {
				if !sleepCtx(ctx, 50*time.Millisecond) {
					r.t.Errorf("the producers finished before a third of the messages were confirmed")
					return
				}
			}
			r.note("stop_app")
			if _, err := rabbitmqctl("stop_app"); err != nil {
				r.t.Errorf("%v", err)
				return
			}
			r.faults.Add(1)
			r.note("stopped; %d confirmed", r.confirmedN.Load())
			sleepCtx(context.Background(), 3*time.Second) // the broker stays down a while
			if _, err := rabbitmqctl("start_app"); err != nil {
				r.t.Errorf("%v", err)
				return
			}
			if _, err := rabbitmqctl("await_startup", "--timeout", "60"); err != nil {
				r.t.Errorf("%v", err)
			}
			r.note("started again")
		},
	})
}

// TestFaultResourceAlarm: a memory alarm is raised while the producers send.
// Publishing is refused at once while it lasts (a publish made while the
// connection is blocked fails with ErrBlocked, never sent unconfirmed), the
// producer connection's health says up with the broker's reason, and once
// the alarm clears the connection is unblocked and everything resumes with
// nothing lost.
func TestFaultResourceAlarm(t *testing.T) {
	url := faults(t)
	n, minSend := loadSize()
	var (
		run              *loadRun
		confirmedAtClear int64 = -1
	)
	runLoad(t, url, loadConfig{
		scenario:  "resource-alarm",
		messages:  n,
		minSend:   minSend,
		producers: 8,
		drain:     90 * time.Second,
		fault: func(ctx context.Context, r *loadRun) {
			run = r
			for r.confirmedN.Load() < int64(n/3) {
				if !sleepCtx(ctx, 50*time.Millisecond) {
					r.t.Errorf("the producers finished before a third of the messages were confirmed")
					return
				}
			}
			r.note("raising a memory alarm")
			if _, err := rabbitmqctl("set_vm_memory_high_watermark", "0.0000001"); err != nil {
				r.t.Errorf("%v", err)
				return
			}
			r.faults.Add(1)
			defer func() {
				r.note("clearing the memory alarm")
				if _, err := rabbitmqctl("set_vm_memory_high_watermark", "0.4"); err != nil {
					r.t.Errorf("%v", err)
				}
				if !pollFor(60*time.Second, func() bool { b, _ := r.prod.Blocked(); return !b }) {
					r.t.Errorf("the producer's connection was still blocked 60 s after the alarm cleared")
				}
				confirmedAtClear = r.confirmedN.Load()
				r.note("unblocked; %d confirmed", confirmedAtClear)
			}()
			// RabbitMQ 3.10 tells a connection it is blocked only once the
			// connection publishes during the alarm; the producers keep
			// publishing, so it comes.
			if !pollFor(30*time.Second, func() bool { b, _ := r.prod.Blocked(); return b }) {
				r.t.Errorf("the producer's connection was not blocked within 30 s of the alarm")
				return
			}
			_, reason := r.prod.Blocked()
			checkBlocked(r, reason)
		},
	})
	// Publishing resumed once the alarm cleared: confirms came after it
	// (the run itself checked that every confirmed message was processed).
	switch {
	case run == nil || confirmedAtClear < 0:
		t.Errorf("the alarm was not raised and cleared")
	case confirmedAtClear < int64(n) && run.confirmedN.Load() <= confirmedAtClear:
		t.Errorf("no publish was confirmed after the alarm cleared (%d confirmed before)", confirmedAtClear)
	}
}

// checkBlocked checks, while the alarm lasts, that a publish is refused
// rather than left waiting, and what health says.
func checkBlocked(r *loadRun, reason string) {
	t := r.t
	// A publish given 20 s must come back refused (ErrBlocked), not run
	// out its time: that is failing fast.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	err := brokertest.Publish(ctx, r.prod, brokertest.Outbound{RoutingKey: r.queue, Body: []byte(`{"seq":-1}`), ContentType: "application/json"})
	if !errors.Is(err, acemq.ErrBlocked) {
		t.Errorf("a publish during the alarm: %v, want an error wrapping ErrBlocked", err)
	} else if !strings.Contains(err.Error(), reason) {
		t.Errorf("the refusal %q does not give the broker's reason %q", err, reason)
	}
	r.note("publish during the alarm: %v", err)

	h := r.prod.Health(context.Background())
	if h.Status != acemq.HealthUp || h.Detail != contract.BlockedDetail+reason || h.Parts["blocked"] != true {
		t.Errorf("producer health during the alarm: %+v, want up with %q", h, contract.BlockedDetail+reason)
	}
	r.note("producer health: %s: %s", h.Status, h.Detail)
	// The consumer's connection publishes nothing and is not blocked.
	if b, _ := r.cons.Blocked(); b {
		t.Errorf("the consumer's connection was blocked though it never published")
	}
	// Hold the alarm a while. How many producer publishes are refused
	// meanwhile is the scheduler's business (the producers may all be
	// waiting for the confirms of what they sent before the alarm); that
	// each one made while the connection is blocked is refused is checked
	// in send, and the drain checks that nothing confirmed was lost.
	sleepCtx(context.Background(), 3*time.Second)
	r.note("producer publishes refused so far: %d", r.refused.Load())
	if h := r.cons.Health(context.Background()); h.Status != acemq.HealthUp {
		t.Errorf("consumer health during the alarm: %+v, want up", h)
	}
}
