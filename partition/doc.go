// Package partition spreads messages over N queues by key, the way the
// AceMQ family does (docs/wire.md §5.10), and reads each partition in
// strict order with a consumer group.
//
// The partition of a key is FNV-1a 32-bit over the key's UTF-8 bytes,
// reduced modulo the partition count as an unsigned number ([Of]); its
// routing key is {base}.{n} ([RoutingKey]). Messages with one key go to one
// partition, so they stay in the order they were published.
//
//	topo, err := partition.Topology("orders", "orders", 8) // exchange, queues orders.0 … orders.7
//	pub, err := partition.NewPublisher(conn, "orders", "orders", 8,
//		func(o Order) string { return o.CustomerID })
//	_, err = pub.Send(ctx, order)
//
// Each partition queue is declared with a single active consumer, so a
// group of consumers of one partition ([Join], members tagged
// acemq-{queue}-{n} from 1) has one member receiving while the others
// stand by and take over, in order, when it goes. Inside one consumer,
// acemq.WithOrderKey keeps per-key order while several handlers run.
//
// See docs/ordering.md for what is and is not promised.
package partition
