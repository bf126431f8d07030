// Package retry builds the retry policies of acemq's consumers: how many
// times a message is attempted, how long to wait between attempts, where
// the wait is held, and when to give up on a message's age (docs/wire.md §7,
// docs/retries.md).
//
// A policy starts from one of three families — [None] (one attempt, the
// default and the zero [Policy]), [Fixed] (n attempts, a constant wait) and
// [Exponential] (n attempts, a doubling wait up to a cap, with ±20 % jitter)
// — and is refined by modifiers that return copies: [Policy.GiveUpAfter],
// [Policy.Jitter] and [Policy.WaitInBrokerFrom]. Waits below the broker
// threshold (30 s by default) are held in the consumer; longer ones on
// broker rung queues, which acemq.Consume and topology.Topology.Queue
// declare when given the policy through acemq.WithRetry:
//
//	acemq.WithRetry(retry.Exponential(5, time.Second, time.Minute).GiveUpAfter(time.Hour))
//
// A policy built with nonsensical values keeps its first mistake, reported
// by [Policy.Err] and by the Consume or Queue that is given it.
// [Policy.String] renders a policy in the family's notation, for example
// "exponential(6, 10s, 1m).giveUpAfter(2m)".
package retry
