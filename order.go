package acemq

import (
	"sync"

	"github.com/acemq/acemq/driver"
)

// Ordered processing per key (WithOrderKey): with several handlers, the
// deliveries that share a key run one at a time, in delivery order, and the
// others in parallel. The worker that takes up a delivery whose key is
// running queues it behind that key and goes back for the next delivery;
// the worker running the key takes the queued ones in turn when it is done.
// No worker ever waits for a key, so a busy key does not hold up the others
// beyond the prefetch slots its queued deliveries take.

// keyOrder is a consumer's running keys and what waits behind each.
type keyOrder struct {
	mu      sync.Mutex
	waiting map[string][]driver.Delivery // running keys → deliveries behind them
}

// processInOrder processes d, or queues it behind the running delivery
// with its key.
func (k *consumerCore) processInOrder(d *driver.Delivery) {
	key := k.orderKeyOf(d)
	o := &k.keyed
	o.mu.Lock()
	if o.waiting == nil {
		o.waiting = map[string][]driver.Delivery{}
	}
	if q, running := o.waiting[key]; running {
		o.waiting[key] = append(q, *d)
		k.unsettled.Add(1) // taken up: Close and WaitIdle count it
		o.mu.Unlock()
		return
	}
	o.waiting[key] = nil
	o.mu.Unlock()
	for {
		k.process(d)
		o.mu.Lock()
		q := o.waiting[key]
		if len(q) == 0 {
			delete(o.waiting, key)
			o.mu.Unlock()
			return
		}
		next := q[0]
		o.waiting[key] = q[1:]
		if k.isStopping() {
			// Not started: they go back to the queue, as every delivery not
			// started when the consumer stops does.
			rest := q
			delete(o.waiting, key)
			o.mu.Unlock()
			for i := range rest {
				_ = rest[i].Nack(true)
				k.unsettled.Add(-1)
			}
			return
		}
		o.mu.Unlock()
		k.unsettled.Add(-1) // process counts it again
		d = &next
	}
}

// orderKeyOf is WithOrderKey's key of d; a key function that panics puts d
// under the empty key rather than stopping the worker.
func (k *consumerCore) orderKeyOf(d *driver.Delivery) (key string) {
	defer func() {
		if recover() != nil {
			key = ""
		}
	}()
	env := ReadEnvelope(d.Headers, d.RoutingKey, d.MessageID)
	return k.cfg.orderKey(newMessage(d.Body, d, env, k.queue))
}

// streamOffset is d's x-stream-offset, or -1.
func streamOffset(d *driver.Delivery) int64 {
	if off, ok := d.StreamOffset(); ok {
		return off
	}
	return -1
}
