package rpc

import (
	"context"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq/internal/tuning"
	"go.opentelemetry.io/otel/trace"
)

// replyBound is the deadline a responder's replies are published under:
// the settlement deadline (tuning.SettlementDeadline, 30 s) counted from
// the end of the second the reply is sent in, so that every reply of one
// second shares one context, and one timer, rather than each making its
// own. A reply is so bounded by 30 to 31 s. The contexts end with the
// responder too: close cancels them all.
type replyBound struct {
	base context.Context // the parent of every second's context; close cancels it
	stop context.CancelFunc
	mu   sync.Mutex // held to make a second's context
	cur  atomic.Pointer[boundSecond]
}

// boundSecond is the context of the replies sent in one second.
type boundSecond struct {
	sec int64 // Unix seconds
	ctx context.Context
	// end cancels ctx; nothing calls it before its deadline, since a reply
	// sent late in its second may still be publishing: ctx ends at its
	// deadline or with the responder.
	end context.CancelFunc
}

func newReplyBound() *replyBound {
	b := &replyBound{}
	b.base, b.stop = context.WithCancel(context.Background())
	return b
}

// context returns the context a reply sent at now is published under,
// carrying the trace span of the handler's context ctx (the reply's publish
// span is its child) but not its cancellation: the caller is waiting for
// the reply even when the handler's context has ended.
func (b *replyBound) context(ctx context.Context, now time.Time) context.Context {
	pctx := b.second(now)
	if span := trace.SpanFromContext(ctx); span.SpanContext().IsValid() {
		pctx = trace.ContextWithSpan(pctx, span)
	}
	return pctx
}

// second returns the context of now's second, making it on the first
// reply of that second. Its deadline is tuning.SettlementDeadline after
// the end of the second.
func (b *replyBound) second(now time.Time) context.Context {
	sec := now.Unix()
	if s := b.cur.Load(); s != nil && s.sec == sec {
		return s.ctx
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if s := b.cur.Load(); s != nil && s.sec == sec {
		return s.ctx
	}
	s := &boundSecond{sec: sec}
	s.ctx, s.end = context.WithDeadline(b.base, time.Unix(sec+1, 0).Add(tuning.SettlementDeadline))
	b.cur.Store(s)
	return s.ctx
}

// close ends every reply context, and the timers they hold.
func (b *replyBound) close() { b.stop() }
