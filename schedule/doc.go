// Package schedule delivers messages later, through the family's
// scheduler on the broker (docs/wire.md §5.7): a ladder of five classic
// queues with uniform times to live — acemq.schedule.1h, .10m, .1m, .10s
// and .1s — each dead-lettering into the control queue acemq.schedule.due,
// where a control consumer either delivers a message or puts it on the
// longest rung that does not overshoot what is left of its wait.
//
//	p := schedule.NewPublisher[Reminder](conn, "billing")
//	env, err := p.SendAfter(ctx, "invoice.due", 4*time.Hour, reminder)
//	…
//	ctrl, err := schedule.Serve(ctx, conn) // somewhere, at least one
//	defer ctrl.Close(ctx)
//
// The names, the rungs' arguments and the four x-schedule-* headers are
// the ones every language's scheduler writes and reads, so a Go control
// consumer delivers messages a Java or Python service scheduled, and the
// other way round.
//
// Unlike the siblings, the Go scheduler keeps the message's identity: the
// delivered message has the id, correlation and causation of the one
// scheduled (SendAt returns its envelope), so a consumer's idempotency
// keyed on the id holds across the hops (docs/wire.md §13 #37). Its
// attempt is 1 and it is first seen when delivered.
//
// Accuracy is about one second: a message whose due time is less than the
// shortest rung away is delivered, so it may arrive up to a second early,
// and each hop adds the broker's expiry and a publish. Every hop is one
// confirmed publish, so a four-hour delay costs four, a ninety-second one
// two. Messages wait on the broker: a stopped control consumer loses
// nothing, and what fell due meanwhile is delivered when one runs again.
// The Topology function returns the declarations, for Plan and Drift.
//
// See docs/scheduling.md for accuracy, costs, broker restarts and what is
// not promised.
package schedule
