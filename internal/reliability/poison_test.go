package reliability

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/rabbitmq"
	"github.com/acemq/acemq/topology"
	amqp "github.com/rabbitmq/amqp091-go"
)

// TestPoisonFrameDeadLettered: a foreign producer (plain amqp091, which
// checks nothing) publishes a message whose headers nest deeper than the
// 32 levels amqp091 reads. Every consumer connection that receives it is
// closed by amqp091 before acemq sees the delivery, and the broker
// redelivers it on the next connection. A quorum queue with a delivery
// limit and the family's dead-lettering breaks the loop: after the limit
// the broker moves the message to {q}.dlq, and the consumer goes on with
// the messages behind it. (On a queue without a delivery limit the loop
// does not end; docs/reliability.md says so.)
func TestPoisonFrameDeadLettered(t *testing.T) {
	url := testenv.AMQPURL(t)
	start := time.Now()
	q := uniqueName("poison")
	dlq := contract.DeadLetterQueue(q)
	deleteQueuesAtCleanup(t, url, q, dlq, contract.ParkedQueue(q))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	var lost atomic.Int64
	c := connect(t, url, "acemq-reliability-poison", acemq.WithOnConnEvent(func(e driver.Event) {
		if e.Kind == driver.EventLost {
			lost.Add(1)
		}
	}))
	const limit = 2
	if err := topology.New().Queue(q, topology.WithDeadLettering(true),
		topology.WithArguments(driver.Table{"x-delivery-limit": int32(limit)})).Apply(ctx, c); err != nil {
		t.Fatal(err)
	}

	// The foreign producer.
	raw, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	ch, err := raw.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := ch.Confirm(false); err != nil {
		t.Fatal(err)
	}
	var nested any = "bottom"
	for range 40 {
		nested = amqp.Table{"d": nested}
	}
	for _, m := range []amqp.Publishing{
		{MessageId: "poison", Headers: amqp.Table{"deep": nested}, ContentType: "application/json", Body: []byte(`{"seq":1}`)},
		{MessageId: "good", ContentType: "application/json", Body: []byte(`{"seq":2}`)},
	} {
		dc, err := ch.PublishWithDeferredConfirmWithContext(ctx, "", q, true, false, m)
		if err != nil {
			t.Fatal(err)
		}
		if ok, err := dc.WaitContext(ctx); !ok || err != nil {
			t.Fatalf("publishing %s: acked %t, %v", m.MessageId, ok, err)
		}
	}

	got := make(chan acemq.Message[payload], 4)
	consumer, err := acemq.Consume(ctx, c, q, func(_ context.Context, m acemq.Message[payload]) acemq.Ack {
		got <- m
		return acemq.Accept()
	}, acemq.WithPrefetch(1))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = consumer.Close(context.Background()) }()
	select {
	case m := <-got:
		if m.Payload.Seq != 2 {
			t.Errorf("the consumer was handed %+v; want only the good message", m)
		}
	case <-time.After(90 * time.Second):
		t.Fatalf("the good message behind the poison was not processed within 90 s (%d connection losses)", lost.Load())
	}
	var inDLQ int
	poll(t, "the poison message in "+dlq, 30*time.Second, func() bool {
		info, err := brokertest.Driver(c).InspectQueue(ctx, dlq)
		inDLQ = info.Messages
		return err == nil && info.Messages == 1
	})
	if lost.Load() == 0 {
		t.Errorf("no connection was lost: the poison message was not poison (has amqp091 changed its limits?)")
	}
	newFigures("poison-frame-amqp").add("sent", 2).add("confirmed", 2).add("delivered", 1).
		add("dead_lettered_by_broker", inDLQ).add("lost", 2-1-inDLQ).add("duplicated", 0).
		add("conn_lost", lost.Load()).add("delivery_limit", limit).add("time", time.Since(start)).log(t)
}

// TestOversizedCopyDeadLettered: a message whose headers nearly fill a
// frame is delivered, but the copy the engine would set aside (the
// original's headers plus x-acemq-error and the envelope) no longer fits
// one, so the driver refuses it and the engine puts the delivery back.
// Without a delivery limit that repeats at once, for ever; with a quorum
// queue's delivery limit and the family's dead-lettering, the broker moves
// the original to {q}.dlq after the limit and the consumer goes on.
func TestOversizedCopyDeadLettered(t *testing.T) {
	url := testenv.AMQPURL(t)
	start := time.Now()
	q := uniqueName("oversized")
	dlq := contract.DeadLetterQueue(q)
	deleteQueuesAtCleanup(t, url, q, dlq, contract.ParkedQueue(q))
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	c := connect(t, url, "acemq-reliability-oversized")
	const limit = 3
	if err := topology.New().Queue(q, topology.WithDeadLettering(true),
		topology.WithArguments(driver.Table{"x-delivery-limit": int32(limit)})).Apply(ctx, c); err != nil {
		t.Fatal(err)
	}
	var requeued, unsendable atomic.Int64
	c.OnSettle(func(s acemq.Settlement) {
		if s.Outcome == acemq.OutcomeRequeued {
			requeued.Add(1)
		}
		if errors.Is(s.SettleErr, rabbitmq.ErrUnsendable) {
			unsendable.Add(1)
		}
	})
	big := driver.Message{RoutingKey: q, Mandatory: true, MessageID: "oversized", ContentType: "application/json",
		Body: []byte(`{"seq":1}`), Headers: driver.Table{"big": strings.Repeat("b", 130900)}}
	if err := brokertest.Driver(c).Publish(ctx, big); err != nil {
		t.Fatal(err)
	}
	if _, err := acemq.NewPublisher[payload](c, "").Send(ctx, q, payload{Seq: 2}); err != nil {
		t.Fatal(err)
	}
	var good atomic.Int64
	consumer, err := acemq.Consume(ctx, c, q, func(_ context.Context, m acemq.Message[payload]) acemq.Ack {
		if m.Payload.Seq == 2 {
			good.Add(1)
			return acemq.Accept()
		}
		return acemq.Park(errors.New("parked on purpose"))
	}, acemq.WithPrefetch(1))
	if err != nil {
		t.Fatal(err)
	}
	defer func() { _ = consumer.Close(context.Background()) }()
	poll(t, "the message behind the oversized one", 60*time.Second, func() bool { return good.Load() == 1 })
	var inDLQ int
	poll(t, "the oversized message in "+dlq, 30*time.Second, func() bool {
		info, err := brokertest.Driver(c).InspectQueue(ctx, dlq)
		inDLQ = info.Messages
		return err == nil && info.Messages == 1
	})
	if unsendable.Load() == 0 {
		t.Errorf("no set-aside was refused as unsendable: the copy fitted after all")
	}
	newFigures("oversized-copy-amqp").add("sent", 2).add("confirmed", 2).add("delivered", 1).
		add("dead_lettered_by_broker", inDLQ).add("lost", 2-1-inDLQ).add("duplicated", 0).
		add("requeued", requeued.Load()).add("delivery_limit", limit).add("time", time.Since(start)).log(t)
}

// TestCrashLoopNeverLosesTheMessage: a service that crashes on one message
// — its connection goes while the handler holds the delivery, every time —
// on a queue declared with the topology's defaults (a quorum queue, with
// the dead-letter half the topology gives quorum queues). RabbitMQ 4 counts
// each crash toward the queue's delivery limit (20 by default) and, after
// it, dead-letters the message into {q}.dlq with the reason delivery_limit
// rather than dropping it; RabbitMQ 3.x has no default limit and keeps
// redelivering it. Either way the message is never lost. The figures say
// how many deliveries it took.
func TestCrashLoopNeverLosesTheMessage(t *testing.T) {
	url := testenv.AMQPURL(t)
	v := testenv.BrokerVersion(t, url)
	major, minor := v.Major, v.Minor
	start := time.Now()
	q := uniqueName("crashloop")
	dlq := contract.DeadLetterQueue(q)
	deleteQueuesAtCleanup(t, url, q, dlq, contract.ParkedQueue(q))
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	admin := connect(t, url, "acemq-reliability-crashloop-admin")
	if err := topology.New().Queue(q).Apply(ctx, admin); err != nil {
		t.Fatal(err)
	}
	if _, err := acemq.NewPublisher[payload](admin, "").Send(ctx, q, payload{Seq: 1}); err != nil {
		t.Fatal(err)
	}
	const crashes = 25 // more than RabbitMQ 4's default limit of 20
	deliveries, lastCount := 0, int64(-1)
	for range crashes {
		// The broker returns a crashed consumer's delivery a little after
		// its connection goes: wait until the message is back on q or
		// has been dead-lettered.
		poll(t, "the message back on "+q+" or in "+dlq, 30*time.Second, func() bool {
			return depth(t, ctx, admin, q)+depth(t, ctx, admin, dlq) == 1
		})
		if depth(t, ctx, admin, q) == 0 {
			break // dead-lettered
		}
		got := make(chan acemq.Message[payload], 1)
		release := make(chan struct{})
		c, err := acemq.Connect(ctx, url, acemq.WithName("acemq-reliability-crashloop"))
		if err != nil {
			t.Fatal(err)
		}
		_, err = acemq.Consume(ctx, c, q, func(_ context.Context, m acemq.Message[payload]) acemq.Ack {
			got <- m
			<-release // the service "hangs" until it crashes
			return acemq.Accept()
		}, acemq.WithPrefetch(1), acemq.WithDrainTimeout(10*time.Millisecond))
		if err != nil {
			t.Fatal(err)
		}
		select {
		case m := <-got:
			deliveries++
			if n, ok := m.DeliveryCount(); ok {
				lastCount = int64(n)
			}
		case <-time.After(30 * time.Second):
			t.Fatalf("delivery %d did not come within 30 s", deliveries+1)
		}
		// The crash: the connection goes with the delivery unsettled (the
		// drain runs out at once; Close reports the stranded delivery).
		// Each crash has a deadline of its own, so that a Close that
		// hangs fails here rather than at the test's timeout.
		cctx, ccancel := context.WithTimeout(ctx, 30*time.Second)
		err = c.Close(cctx)
		ccancel()
		close(release)
		if errors.Is(err, context.DeadlineExceeded) {
			t.Fatalf("crash %d: closing the connection did not finish within 30 s: %v", deliveries, err)
		}
	}
	// The last crash's return, too, comes a little after the connection
	// goes.
	pollFor(10*time.Second, func() bool { return depth(t, ctx, admin, q)+depth(t, ctx, admin, dlq) == 1 })
	inQueue, inDLQ := depth(t, ctx, admin, q), depth(t, ctx, admin, dlq)
	// The handler saw the broker's count on every redelivery: the failed
	// deliveries before it (crashes count on every version).
	if lastCount != int64(deliveries-1) {
		t.Errorf("the last delivery's DeliveryCount is %d, want %d", lastCount, deliveries-1)
	}
	if inQueue+inDLQ != 1 {
		t.Fatalf("after %d crashes the message is on %s %d time(s) and on %s %d time(s): lost or duplicated", deliveries, q, inQueue, dlq, inDLQ)
	}
	if major >= 4 {
		if inDLQ != 1 || deliveries != 21 {
			t.Errorf("RabbitMQ %d.%d: %d deliveries, in %s: %d; want it dead-lettered after 21 (the default limit of 20, plus one)", major, minor, deliveries, dlq, inDLQ)
		}
		d := brokertest.Get(t, admin, dlq)
		if d.Headers["x-first-death-reason"] != "delivery_limit" {
			t.Errorf("x-first-death-reason %#v, want delivery_limit", d.Headers["x-first-death-reason"])
		}
	} else if inQueue != 1 || deliveries != crashes {
		t.Errorf("RabbitMQ %d.%d: %d deliveries, still on %s: %d; want it kept (no default limit)", major, minor, deliveries, q, inQueue)
	}
	newFigures("crash-loop-amqp").add("broker", fmt.Sprintf("%d.%d", major, minor)).add("sent", 1).
		add("deliveries", deliveries).add("last_delivery_count", lastCount).add("dead_lettered_by_broker", inDLQ).
		add("still_queued", inQueue).add("lost", 1-inQueue-inDLQ).add("time", time.Since(start)).log(t)
}

// depth is the number of ready messages on q.
func depth(t *testing.T, ctx context.Context, c *acemq.Conn, q string) int {
	t.Helper()
	var n int
	poll(t, "inspecting "+q, 10*time.Second, func() bool {
		info, err := brokertest.Driver(c).InspectQueue(ctx, q)
		n = info.Messages
		return err == nil
	})
	return n
}
