package rabbitmq

import (
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/testenv"
)

// After the broker kills the connection, a subscription resubscribes with
// the arguments ConsumeSpec.Resume returns, not the ones it started with:
// a stream consumer that started at "first" carries on at the offset it
// asks for.
func TestFaultResumeArguments(t *testing.T) {
	testenv.AMQPURL(t)
	testenv.Faults(t)
	name := uniqueName("resume")
	c := openTest(t, func(cfg *driver.Config) { cfg.Name = name })
	ctx := ctxFor(t, time.Minute)
	q := tempQueue(t, c, driver.Queue{Durable: true, Args: driver.Table{"x-queue-type": "stream"}})
	for i := range 10 {
		if err := c.Publish(ctx, driver.Message{RoutingKey: q, MessageID: strconv.Itoa(i), Body: []byte(strconv.Itoa(i))}); err != nil {
			t.Fatal(err)
		}
	}
	var resumed atomic.Int32
	sub, err := c.Consume(ctx, driver.ConsumeSpec{Queue: q, Prefetch: 2, Args: driver.Table{"x-stream-offset": "first"},
		Resume: func() driver.Table {
			resumed.Add(1)
			return driver.Table{"x-stream-offset": int64(7)}
		}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = sub.Close() })
	receive := driver.Receive(sub)
	d, ok := receive()
	if off, _ := d.StreamOffset(); !ok || off != 0 {
		t.Fatalf("the first delivery has offset %d (%v), want 0", off, ok)
	}
	if testenv.CloseConnection(t, name) == 0 {
		t.Fatal("no connection named " + name + " to close")
	}
	// What the lost channel had already handed over may still come; then
	// the resubscription starts at offset 7.
	for {
		d, ok := receive()
		if !ok {
			t.Fatal("the subscription ended instead of resubscribing")
		}
		off, _ := d.StreamOffset()
		_ = d.Ack() // frees the prefetch slot; fails harmlessly on the lost channel
		if resumed.Load() == 0 {
			if off > 2 {
				t.Fatalf("offset %d arrived before the resubscription", off)
			}
			continue
		}
		if off != 7 {
			t.Fatalf("after resubscribing the first offset is %d, want 7 (what Resume asked for)", off)
		}
		break
	}
}
