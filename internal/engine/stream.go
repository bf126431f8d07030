package engine

import (
	"context"

	"github.com/acemq/acemq/driver"
)

// Stream turns a consumer into a stream reader (package stream's Reader).
// The consume engine then settles as a stream allows (docs/wire.md §5.9):
// Accept acknowledges; Reject and Park copy the message to its set-aside
// queue, trying again until the copy is made or the consumer closes; Retry,
// InProgress and a retryable decoding failure are refused and the message
// is parked with a reason saying so; nothing is ever put back (a stream
// refuses basic.nack and basic.reject), so a delivery the engine does not
// settle (one the circuit breaker holds back, one not started when the
// consumer pauses or closes) is left for the reader to read again from its
// position.
type Stream struct {
	// Args is the x-stream-offset of each subscription: the start for the
	// first, the position after a pause or a lost connection.
	Args func() driver.Table
	// Seen reports whether the delivery at offset was settled before (a
	// redelivery after a resumption that began at an earlier chunk): it is
	// acknowledged and skipped.
	Seen func(offset int64) bool
	// Settled is called with a delivery's offset after it is settled,
	// before the settlement is reported; never for a delivery left
	// unsettled. (Offsets, not deliveries: a delivery passed to a function
	// value would be moved to the heap for every message.)
	Settled func(offset int64)
	// Ended is called once the subscription ended without Close (the
	// stream was deleted).
	Ended func()
}

type streamKey struct{}

// WithStream returns ctx carrying s: acemq.Consume started with it reads a
// stream. Only this module can build one, so applications cannot.
func WithStream(ctx context.Context, s *Stream) context.Context {
	return context.WithValue(ctx, streamKey{}, s)
}

// StreamOf returns the Stream ctx carries, or nil.
func StreamOf(ctx context.Context) *Stream {
	s, _ := ctx.Value(streamKey{}).(*Stream)
	return s
}
