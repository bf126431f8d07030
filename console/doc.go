// Package console is the operator console of acemq: a web page, served by
// an http.Handler, that shows a broker's queues with their dead-letter
// halves ({q}.dlq, {q}.parked) and retry rungs, the messages in a queue
// without taking them, grouped by reason so that a thousand failures of
// one bug read as one line, each message's envelope, headers and body,
// and replays, deletes or exports them.
//
//	con, err := console.New(conn, console.WithQueues("orders.new"))
//	if err != nil {
//		return err
//	}
//	defer con.Close()
//	http.ListenAndServe("127.0.0.1:8080", con)
//
// The command `acemq console` serves it (docs/console.md; docs/cli/console.md).
//
// The queues come from RabbitMQ's management API (WithManagement), with
// their rates, or else from the names given (WithQueues, WithTopology),
// inspected one by one. Looking at a queue reads up to WithPeekLimit of its
// messages with a queues.Browser, keeping a summary of each (never its
// body) within WithPeekBudget bytes, and puts every one back: nothing is
// taken, but each looked-at message is marked redelivered, and on a quorum
// queue each look counts towards its delivery limit (the dead-letter halves
// the library declares are classic and have none).
//
// Replay goes through package replay: each message is published to the
// queue it came from, confirmed, and only then removed from the dead-letter
// queue. Delete takes messages for good and needs the request to say the
// operator confirmed it. Export writes messages, peeked, as JSON lines,
// each as it is read.
//
// Every read of a queue by one console is serialised, so that a look and a
// replay do not each see half of the queue. The JSON API needs the header
// the page carries (a cross-site page cannot send it); with WithToken every
// request needs the token, and without one the console answers only
// requests addressed to a loopback name.
package console
