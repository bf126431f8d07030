package rabbitmq

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
	"go.uber.org/goleak"
)

// The TestFault tests hurt the broker for everyone using it (they close
// every connection, raise a resource alarm or stop the broker). They run
// only with ACEMQ_TEST_FAULTS=1, alone (go test -p 1 -run TestFault), and
// always restore the broker, even when they fail.

func faults(t *testing.T) {
	t.Helper()
	testenv.AMQPURL(t)
	testenv.Faults(t)
	testenv.RequireCtl(t)
}

func TestFaultResourceAlarm(t *testing.T) {
	faults(t)
	var log eventLog
	c := openTest(t, func(cfg *driver.Config) { cfg.OnEvent = log.add })
	ctx := ctxFor(t, 120*time.Second)
	q := tempQueue(t, c, driver.Queue{})
	if err := c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: "before"}); err != nil {
		t.Fatal(err)
	}

	// Registered last, so it runs first: the broker is restored before the
	// other clean-ups need it.
	t.Cleanup(func() { testenv.Rabbitmqctl(t, "set_vm_memory_high_watermark", "0.4") })
	testenv.Rabbitmqctl(t, "set_vm_memory_high_watermark", "0.0000001")

	// RabbitMQ blocks a connection, and says so, only when it publishes
	// during the alarm: keep publishing until the notification arrives.
	// These publishes are in flight when the broker stops reading; they
	// wait for their confirms (here bounded by a short context).
	var triggers sync.WaitGroup
	testenv.Eventually(t, "the connection to be blocked", func() bool {
		if b, _ := c.Blocked(); b {
			return true
		}
		triggers.Go(func() {
			tctx, cancel := context.WithTimeout(ctx, 2*time.Second)
			defer cancel()
			_ = c.Publish(tctx, driver.Message{RoutingKey: q, MessageID: "trigger"})
		})
		time.Sleep(500 * time.Millisecond)
		b, _ := c.Blocked()
		return b
	})
	defer triggers.Wait()
	_, reason := c.Blocked()
	start := time.Now()
	err := c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: "blocked"})
	if !errors.Is(err, driver.ErrBlocked) || !strings.Contains(err.Error(), reason) || reason == "" {
		t.Fatalf("publish while blocked: %v (reason %q)", err, reason)
	}
	// Refused before sending, not after waiting for a confirm that cannot
	// come (the confirm timeout, 10 s): the bound is far from both, so
	// that a loaded machine's scheduling does not decide the outcome.
	if d := time.Since(start); d > 2*time.Second {
		t.Fatalf("publish while blocked took %v: it waited instead of failing at once", d)
	}
	t.Logf("blocked publish: %v", err)
	if err := c.Ping(ctx); err != nil {
		t.Fatalf("Ping while blocked: %v", err)
	}
	if log.count(driver.EventBlocked) == 0 {
		t.Fatal("no blocked event")
	}

	testenv.Rabbitmqctl(t, "set_vm_memory_high_watermark", "0.4")
	testenv.Eventually(t, "the connection to be unblocked", func() bool { b, _ := c.Blocked(); return !b })
	if log.count(driver.EventUnblocked) == 0 {
		t.Fatal("no unblocked event")
	}
	if err := c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: "after"}); err != nil {
		t.Fatalf("publish after the alarm cleared: %v", err)
	}
}

func TestFaultRecoveryUnderLoad(t *testing.T) {
	faults(t)
	defer goleak.VerifyNone(t, goleak.IgnoreCurrent())
	const total = 10000

	var log eventLog
	cfg := driver.Config{URLs: []string{testenv.AMQPURL(t)}, Name: "acemq-fault-recovery", OnEvent: log.add}
	c, err := open(ctxFor(t, 30*time.Second), cfg)
	if err != nil {
		t.Fatal(err)
	}
	ctx := ctxFor(t, 5*time.Minute)
	q := uniqueName("recovery")
	if _, err := c.DeclareQueue(ctx, driver.Queue{Name: q, Durable: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteQueue(t, q) })

	sub, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q, Prefetch: 100})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu       sync.Mutex
		received = map[string]int{}
	)
	consumed := make(chan struct{})
	go func() {
		defer close(consumed)
		for d := range sub.Deliveries() {
			mu.Lock()
			received[d.MessageID]++
			mu.Unlock()
			_ = d.Ack() // may fail after a loss: the broker redelivers
		}
	}()

	var (
		confirmed sync.Map
		nOK, nErr atomic.Int64
		next      atomic.Int64
		wg        sync.WaitGroup
	)
	for range 16 {
		wg.Go(func() {
			for {
				i := next.Add(1)
				if i > total {
					return
				}
				id := fmt.Sprint(i)
				err := c.Publish(ctx, driver.Message{RoutingKey: q, Mandatory: true, MessageID: id, Body: make([]byte, 256)})
				if err == nil {
					confirmed.Store(id, true)
					nOK.Add(1)
					continue
				}
				nErr.Add(1)
				if !errors.Is(err, driver.ErrLost) && !errors.Is(err, driver.ErrConfirmTimeout) {
					t.Errorf("publish %s: %v", id, err)
				}
			}
		})
	}
	killed := make(chan struct{})
	go func() {
		defer close(killed)
		for range 3 {
			time.Sleep(700 * time.Millisecond)
			testenv.Rabbitmqctl(t, "close_all_connections", "test")
		}
	}()
	wg.Wait()
	<-killed
	t.Logf("%d publishes confirmed, %d failed (lost with their connection)", nOK.Load(), nErr.Load())
	testenv.Eventually(t, "a recovery after every loss", func() bool {
		return log.count(driver.EventRecovered) == log.count(driver.EventLost)
	})
	if log.count(driver.EventRecovered) == 0 {
		t.Fatal("the connection was never lost")
	}
	t.Logf("%d losses, %d recoveries", log.count(driver.EventLost), log.count(driver.EventRecovered))

	deadline := time.Now().Add(60 * time.Second)
	for {
		missing := 0
		mu.Lock()
		confirmed.Range(func(k, _ any) bool {
			if received[k.(string)] == 0 {
				missing++
			}
			return true
		})
		mu.Unlock()
		if missing == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d confirmed publishes were never delivered", missing)
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	<-consumed
}

func TestFaultBrokerRestart(t *testing.T) {
	faults(t)
	old := backoffBase
	backoffBase = 200 * time.Millisecond
	t.Cleanup(func() { backoffBase = old })
	var log eventLog
	c := openTest(t, func(cfg *driver.Config) { cfg.OnEvent = log.add })
	ctx := ctxFor(t, 3*time.Minute)
	q := uniqueName("restart")
	if _, err := c.DeclareQueue(ctx, driver.Queue{Name: q, Durable: true}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { deleteQueue(t, q) })
	sub, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q})
	if err != nil {
		t.Fatal(err)
	}

	t.Cleanup(func() { testenv.Rabbitmqctl(t, "start_app") })
	testenv.Rabbitmqctl(t, "stop_app")
	testenv.Eventually(t, "two failed attempts", func() bool { return log.count(driver.EventRetrying) >= 2 })
	testenv.Rabbitmqctl(t, "start_app")
	testenv.Eventually(t, "recovery", func() bool { return log.count(driver.EventRecovered) > 0 })
	if err := c.Publish(ctx, driver.Message{RoutingKey: q, Mandatory: true, MessageID: "after-restart"}); err != nil {
		t.Fatal(err)
	}
	d := recvOne(t, sub)
	if d.MessageID != "after-restart" {
		t.Fatalf("got %q", d.MessageID)
	}
	_ = d.Ack()
	for _, e := range log.all() {
		if e.Kind == driver.EventRetrying {
			t.Logf("retry %d after %v: %v", e.Attempt, e.Delay, e.Err)
		}
	}
}
