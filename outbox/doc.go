// Package outbox is the transactional outbox: a message is recorded in the
// application's own database transaction, with its writes, and a relay
// publishes it afterwards — so a message goes out if and only if the
// transaction committed.
//
//	pub := outbox.NewPublisher[Order](store.Outbox(), "orders")
//	tx, _ := db.BeginTx(ctx, nil)
//	// … the application's writes through tx …
//	pub.Send(ctx, tx, "order.placed", order)
//	tx.Commit()
//
//	relay := outbox.NewRelay(conn, store.Outbox(), outbox.WithNotifier(pgnotify.New(db, store.NotifyChannel())))
//	go relay.Run(ctx)
//
// The record keeps the whole message: the encoded body, its content type
// and every header with its AMQP type (an int32 stays an int32;
// docs/wire.md §13 #38). Its envelope id is the message id of every publish
// of it, so a consumer's inbox (package inbox) recognises a record the relay
// published twice — the relay publishes at least once: a crash between
// the confirm and the deletion of the record publishes it again. A record
// keeps the origin its envelope was given; one recorded without an origin
// goes out with the relay connection's (acemq.WithOrigin).
//
// The relay publishes with confirms, mandatory unless recorded otherwise,
// batches of 100 pipelined, in the order recorded per destination
// (exchange and routing key); a published record is deleted; a failed one
// is tried again after a doubling backoff from 1 s, and retired after 10
// failed attempts with its reason kept (docs/wire.md §12), for an operator
// to revive (acemq outbox revive). It polls every second and, with a
// Notifier (package outbox/pgnotify on PostgreSQL; the memory store is its
// own), wakes as soon as a record commits. Several relays may run on one
// store: the SQL store locks each batch with FOR UPDATE SKIP LOCKED, so no
// record is handed to two relays at once, and a destination's records wait
// while an earlier one is held by another relay.
//
// Telemetry: acemq.outbox.total (outcome published or failed),
// acemq.outbox.lag, acemq.outbox.retired, and a span per batch
// (docs/observability.md).
//
// docs/outbox.md in the repository has the costs and what it does not do.
package outbox
