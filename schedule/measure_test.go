package schedule

import (
	"context"
	"os"
	"slices"
	"sync"
	"testing"
	"time"

	amqp "github.com/rabbitmq/amqp091-go"
	"go.opentelemetry.io/otel/attribute"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/brokertest"
	"github.com/acemq/acemq/internal/telemetry"
	"github.com/acemq/acemq/internal/testenv"
	"github.com/acemq/acemq/topology"
)

// TestMeasureScheduler measures, on RabbitMQ, with ACEMQ_MEASURE=1:
//
//   - the control consumer's hop rate (N messages taken from the control
//     queue and put on a rung) beside raw amqp091-go doing the same work
//     (consume with prefetch 50, 8 workers each publishing the delivery,
//     confirmed, to the next queue and acking it), as a ratio;
//   - the lateness of 200 messages scheduled 1.5 s ahead through a ladder
//     with the contract's times to live (under names of the test's own).
//
// It asserts nothing about the figures (the machine is shared); it logs
// them for docs/scheduling.md.
func TestMeasureScheduler(t *testing.T) {
	if os.Getenv("ACEMQ_MEASURE") == "" {
		t.Skip("set ACEMQ_MEASURE=1 to measure")
	}
	url := testenv.AMQPURL(t)
	ctx := context.Background()
	const n = 2000
	body := []byte(`{"id":"measure"}`)
	for round := range 3 {
		c, reader := connect(t, url)
		prefix := testenv.Unique(t, "acemq-sched-measure")
		l := newLadder(prefix, prefix+".due", time.Minute, time.Hour, 10*time.Minute, time.Minute, 10*time.Second, time.Second)
		cleanupLadder(t, c, l)
		if err := l.topology().Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
		// N messages due in two hours waiting on the control queue.
		j := job{exchange: "", routingKey: "nowhere", due: time.Now().Add(2 * time.Hour), contentType: "application/json"}
		for range n {
			env := acemq.MustEnvelope(acemq.Fields{})
			if err := brokertest.Driver(c).Publish(ctx, driver.Message{RoutingKey: l.due, MessageID: env.ID(), ContentType: octetStream, Body: body, Headers: hopHeaders(env, j)}); err != nil {
				t.Fatal(err)
			}
		}
		start := time.Now()
		stop := serve(t, c, ladderOption{l})
		testenv.Eventually(t, "every hop", func() bool {
			return counters(t, reader)[key(telemetry.ScheduleHops, attribute.String("rung", l.rungs[0].name))] == n
		})
		ours := time.Since(start)
		stop()

		// Raw: the same moves, queue A to queue B.
		a, b := prefix+".raw-a", prefix+".raw-b"
		brokertest.DeleteAtEnd(t, c, a, b)
		if err := topology.New().Queue(a, topology.WithQueueType(topology.QueueClassic)).Queue(b, topology.WithQueueType(topology.QueueClassic)).Apply(ctx, c); err != nil {
			t.Fatal(err)
		}
		for range n {
			env := acemq.MustEnvelope(acemq.Fields{})
			if err := brokertest.Driver(c).Publish(ctx, driver.Message{RoutingKey: a, MessageID: env.ID(), ContentType: octetStream, Body: body, Headers: hopHeaders(env, j)}); err != nil {
				t.Fatal(err)
			}
		}
		raw := rawMoves(t, url, a, b, n)
		t.Logf("round %d: %d hops in %v (%.0f/s); raw amqp091-go %v (%.0f/s); ratio ours/raw %.2f", round, n, ours, float64(n)/ours.Seconds(), raw, float64(n)/raw.Seconds(), ours.Seconds()/raw.Seconds())
	}

	// Lateness through the real times to live.
	c, _ := connect(t, url)
	l := fastLadder(t, c, 1)
	tg := newTarget(t, c)
	serve(t, c, ladderOption{l})
	p := NewPublisher[order](c, "", ladderOption{l})
	due := map[string]time.Time{}
	for i := range 200 {
		at := time.Now().Add(1500 * time.Millisecond)
		if _, err := p.SendAt(ctx, tg.q, at, orderID(i)); err != nil {
			t.Fatal(err)
		}
		due[orderID(i).ID] = at
	}
	msgs, when := tg.wait(t, 200)
	var late []time.Duration
	for i, m := range msgs {
		late = append(late, when[i].Sub(due[m.Payload.ID]))
	}
	slices.Sort(late)
	t.Logf("lateness of 200 messages at 1.5 s (negative: early): min %v, median %v, p99 %v, max %v", late[0], late[100], late[197], late[199])
}

// rawMoves moves n messages from a to b with plain amqp091-go: prefetch
// 50, 8 workers, each with a confirm-mode channel, publish then wait for
// the confirm, then ack.
func rawMoves(t *testing.T, url, a, b string, n int) time.Duration {
	conn, err := amqp.Dial(url)
	if err != nil {
		t.Fatal(err)
	}
	defer conn.Close()
	cch, err := conn.Channel()
	if err != nil {
		t.Fatal(err)
	}
	if err := cch.Qos(50, 0, false); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	ds, err := cch.Consume(a, "", false, false, false, false, nil)
	if err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var mu sync.Mutex
	done := 0
	finished := make(chan struct{})
	for range 8 {
		pch, err := conn.Channel()
		if err != nil {
			t.Fatal(err)
		}
		if err := pch.Confirm(false); err != nil {
			t.Fatal(err)
		}
		wg.Go(func() {
			for d := range ds {
				dc, err := pch.PublishWithDeferredConfirm("", b, true, false, amqp.Publishing{
					Headers: d.Headers, ContentType: d.ContentType, MessageId: d.MessageId, DeliveryMode: amqp.Persistent, Body: d.Body})
				if err != nil {
					t.Error(err)
					return
				}
				if ok, err := dc.WaitContext(context.Background()); !ok || err != nil {
					t.Error("not confirmed", err)
					return
				}
				_ = d.Ack(false)
				mu.Lock()
				done++
				if done == n {
					close(finished)
				}
				mu.Unlock()
			}
		})
	}
	<-finished
	took := time.Since(start)
	_ = cch.Cancel("", false)
	_ = cch.Close()
	wg.Wait()
	return took
}
