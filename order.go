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
	// recv makes taking a delivery and registering its key one step, so
	// that two workers cannot take two deliveries of a key and register
	// them in the other order.
	recv    sync.Mutex
	mu      sync.Mutex
	waiting map[string][]queued // running keys → deliveries behind them
}

// queued is a delivery waiting behind its key, with the subscription
// (generation) it came from.
type queued struct {
	d driver.Delivery
	g *generation
}

// receiver is how the consumer's workers take deliveries from g: straight
// from its subscription, or with WithOrderKey through orderedReceive.
func (k *consumerCore) receiver(g *generation) func() (driver.Delivery, bool) {
	receive := driver.Receive(g.sub)
	if k.cfg.orderKey == nil {
		return receive
	}
	return func() (driver.Delivery, bool) { return k.orderedReceive(receive, g) }
}

// orderedReceive takes the next delivery whose key is not running and marks
// its key running; a delivery whose key is running is queued behind it
// (the worker running the key takes it) and the next is taken instead.
func (k *consumerCore) orderedReceive(receive func() (driver.Delivery, bool), g *generation) (driver.Delivery, bool) {
	o := &k.keyed
	o.recv.Lock()
	defer o.recv.Unlock()
	for {
		d, ok := receive()
		if !ok || g.draining.Load() || k.isStopping() || !k.brk.admit() {
			return d, ok // work puts back a delivery taken as the consumer stops or pauses
		}
		key := k.orderKeyOf(&d)
		o.mu.Lock()
		if o.waiting == nil {
			o.waiting = map[string][]queued{}
		}
		q, running := o.waiting[key]
		if !running {
			o.waiting[key] = nil
			o.mu.Unlock()
			return d, true
		}
		o.waiting[key] = append(q, queued{d, g})
		// Taken up: Close, Pause and WaitIdle count it.
		k.state.AddUnsettled(1)
		g.pending.Add(1)
		o.mu.Unlock()
	}
}

// processInOrder processes d, whose key orderedReceive marked running, then
// every delivery queued behind that key, in order.
func (k *consumerCore) processInOrder(d *driver.Delivery, g *generation) {
	key := k.orderKeyOf(d)
	o := &k.keyed
	for {
		k.process(d, g)
		o.mu.Lock()
		q := o.waiting[key]
		if len(q) == 0 {
			delete(o.waiting, key)
			o.mu.Unlock()
			return
		}
		next := q[0]
		if next.g.draining.Load() || k.isStopping() {
			// Not started: they go back to the queue with a nack (not
			// processed), as every delivery not started when the consumer
			// stops or pauses does.
			delete(o.waiting, key)
			o.mu.Unlock()
			for _, w := range q {
				_ = w.d.Nack(true)
				k.state.AddUnsettled(-1)
				w.g.settled()
			}
			return
		}
		o.waiting[key] = q[1:]
		o.mu.Unlock()
		k.state.AddUnsettled(-1) // process counts it again
		d, g = &next.d, next.g
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
	env := deliveryEnvelope(d)
	return k.cfg.orderKey(newMessage(d.Body, d, env, k.queue))
}
