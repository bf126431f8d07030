package rpc

import (
	"context"
	"errors"
	"testing"
	"time"

	"go.opentelemetry.io/otel/trace"
)

// The replies of one second share a context whose deadline is the
// settlement deadline after the end of that second: a reply is bounded by
// 30 to 31 s. The next second gets a context of its own; close ends them
// all. Times are made up (an hour ahead, so the contexts are live), never
// waited for.
func TestReplyBound(t *testing.T) {
	b := newReplyBound()
	sec := time.Now().Add(time.Hour).Truncate(time.Second)
	first := b.second(sec)
	for _, off := range []time.Duration{0, time.Nanosecond, 250 * time.Millisecond, time.Second - time.Nanosecond} {
		now := sec.Add(off)
		ctx := b.second(now)
		if ctx != first {
			t.Fatalf("a reply %s into the second got a context of its own", off)
		}
		dl, ok := ctx.Deadline()
		if !ok {
			t.Fatal("a reply context has no deadline")
		}
		if d := dl.Sub(now); d <= 30*time.Second || d > 31*time.Second {
			t.Fatalf("a reply sent %s into its second is bounded by %s; want more than 30 s, at most 31 s", off, d)
		}
	}
	next := b.second(sec.Add(time.Second))
	if next == first {
		t.Fatal("the next second shares the previous second's context")
	}
	if dl, _ := next.Deadline(); !dl.Equal(sec.Add(32 * time.Second)) {
		t.Fatalf("the next second's deadline is %s after the first's start, want 32 s", dl.Sub(sec))
	}
	if b.second(sec.Add(1500*time.Millisecond)) != next {
		t.Fatal("a second reply in the next second got a context of its own")
	}
	if first.Err() != nil || next.Err() != nil {
		t.Fatalf("reply contexts ended before their deadline: %v, %v", first.Err(), next.Err())
	}

	b.close()
	for _, ctx := range []context.Context{first, next, b.second(sec.Add(2 * time.Second))} {
		if !errors.Is(ctx.Err(), context.Canceled) {
			t.Fatalf("after close a reply context's Err() = %v, want context.Canceled", ctx.Err())
		}
	}
}

// A reply's context keeps the handler's trace span (its publish span is a
// child of the handler's) but not its end: the reply goes out after the
// handler's context is cancelled.
func TestReplyContextKeepsSpanNotCancellation(t *testing.T) {
	b := newReplyBound()
	defer b.close()
	sc := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID: trace.TraceID{1}, SpanID: trace.SpanID{2}, TraceFlags: trace.FlagsSampled,
	})
	handler, cancel := context.WithCancel(trace.ContextWithSpanContext(context.Background(), sc))
	cancel()
	now := time.Now().Add(time.Hour)
	ctx := b.context(handler, now)
	if ctx.Err() != nil {
		t.Fatalf("the reply context ended with the handler's: %v", ctx.Err())
	}
	if got := trace.SpanContextFromContext(ctx); !got.Equal(sc) {
		t.Fatalf("the reply context carries span %v, want the handler's %v", got, sc)
	}
	if dl, _ := ctx.Deadline(); dl != mustDeadline(t, b.second(now)) {
		t.Fatalf("the reply context's deadline %s is not its second's", dl)
	}
	if plain := b.context(context.Background(), now); plain != b.second(now) {
		t.Fatal("a handler context without a span did not get its second's context as it is")
	}
}

func mustDeadline(t *testing.T, ctx context.Context) time.Time {
	t.Helper()
	dl, ok := ctx.Deadline()
	if !ok {
		t.Fatal("no deadline")
	}
	return dl
}
