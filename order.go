package acemq

import "github.com/acemq/acemq/driver"

// Ordered processing per key (WithOrderKey): the consume engine
// (internal/engine's order.go) runs the deliveries that share a key one at
// a time, in delivery order, and the others in parallel; the key is the
// application's function of the message, called here.

// orderKeyOf is WithOrderKey's key of d; a key function that panics puts d
// under the empty key rather than stopping the worker.
func (k *consumerCore) orderKeyOf(d driver.Delivery) (key string) {
	defer func() {
		if recover() != nil {
			key = ""
		}
	}()
	env := deliveryEnvelope(&d)
	return k.cfg.orderKey(newMessage(d.Body, &d, env, k.queue))
}
