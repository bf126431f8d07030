// Package inbox is the idempotent consumer: it wraps a handler so that a
// message whose key (the envelope id by default) was already handled is
// acknowledged without running the handler again.
//
// acemq delivers at least once: a lost confirm makes a producer publish a
// message again, a lost ack makes the broker deliver it again (the counts
// are in docs/reliability.md). Wrap turns that into at most one run per
// key, as long as the key's confirmation is kept:
//
//	in := inbox.New(inbox.NewMemory(), "billing")
//	acemq.Consume(ctx, conn, "invoices", inbox.Wrap(in, handle))
//
// A key is claimed before the handler runs. The claim is a lease (5 min by
// default): when the handler accepts, the claim is confirmed; when it asks
// for a retry, rejects, parks or panics, the claim is released, so that the
// retry runs it again; a message whose key another worker holds is put back
// in progress (acemq.InProgress, no attempt spent); a confirmed key is
// answered acemq.Duplicate, counted as outcome "duplicate" on
// acemq.consume.total.
//
// With a database store (package sqlstore), WrapTx runs the handler in a
// transaction of that database and writes the confirmation in the same
// transaction: the handler's own writes and the confirmation commit
// together, so a crash anywhere leaves both or neither, and a redelivery
// after the commit is a duplicate. That is exactly-once effects — inside
// that database only. A handler's effects elsewhere (an e-mail, a call to
// another service, a publish) are not made exactly once by any inbox; use
// package outbox for publishes.
//
// Expired claims and confirmations older than the retention (1 h for the
// memory store, 7 days for the SQL stores) are pruned by the inbox itself,
// every 10 minutes by default (WithPruneEvery). A duplicate that arrives
// after its confirmation was pruned runs the handler again.
//
// docs/inbox.md in the repository has the costs and the failure cases.
package inbox
