// Package stream reads RabbitMQ streams (x-queue-type=stream) the way the
// AceMQ family does (docs/wire.md §5.9), on RabbitMQ and on the memory://
// broker alike.
//
// A stream is an append-only log: publishing appends, reading removes
// nothing, and every message has an offset. Declare one with a topology,
// with retention by age and size:
//
//	topo := topology.New().Queue("orders.events",
//		topology.WithQueueType(topology.QueueStream),
//		topology.WithMaxAge(7*24*time.Hour),        // x-max-age=7D
//		topology.WithMaxLengthBytes(10<<30))        // x-max-length-bytes
//
// Publish to it as to any queue, and read it with [Read]:
//
//	r, err := stream.Read(ctx, conn, "orders.events",
//		func(ctx context.Context, m acemq.Message[Event]) acemq.Ack {
//			log.Printf("offset %d: %v", m.Offset, m.Payload)
//			return acemq.Accept()
//		},
//		stream.WithOffset(stream.First()),
//		stream.WithCheckpoints(store, "billing@orders.events"))
//
// A reader starts at [First], [Last], [Next] (the default), an offset
// ([At]) or a time ([Since]); handles one message at a time, in offset
// order; and settles as a stream allows: accepting advances the position,
// rejecting copies the message to {stream}.dlq and parking to
// {stream}.parked, and retrying is refused (the message is parked, with a
// reason saying why), since a stream cannot give a message back. The
// original always stays in the stream.
//
// A reader runs on the consume engine of acemq.Consume: the connection's
// consume interceptors see its messages, and [WithConsumeInterceptors],
// [WithMiddleware] and [WithBreaker] give it the consumer's pipeline; its
// settlements reach Conn.OnSettle, the metrics and the spans as a
// consumer's do, with the stream as the queue.
//
// Nothing on the broker remembers where a reader got to. Within one
// connection the reader does: after a lost connection it resumes from the
// offset after the last one it settled, so nothing is skipped and nothing
// settled is read again. Across restarts, a [Checkpoints] store does:
// [Memory] in the process, package stream/sqlcheckpoint in PostgreSQL.
//
// See docs/streams.md for the costs and what is not promised.
package stream
