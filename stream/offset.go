package stream

import (
	"fmt"
	"strconv"
	"strings"
	"time"
)

// Offset is where a Reader starts in a stream: First, Last, Next (the
// default), At an offset, or Since a time. The zero Offset is Next.
type Offset struct {
	kind offsetKind
	n    int64
	t    time.Time
}

type offsetKind int

const (
	kindNext offsetKind = iota
	kindFirst
	kindLast
	kindAt
	kindSince
)

// First starts at the oldest message the stream still holds.
func First() Offset { return Offset{kind: kindFirst} }

// Last starts at the last chunk the broker has written: on RabbitMQ a
// chunk is a batch of messages written together, so a reader from Last may
// receive a few messages from before the last one.
func Last() Offset { return Offset{kind: kindLast} }

// Next starts with the first message published after the reader
// subscribes. It is the default, and is always sent to the broker
// explicitly.
func Next() Offset { return Offset{kind: kindNext} }

// At starts at offset n. Below the first offset the stream still holds it
// starts there; beyond the end, with the next message published.
func At(n int64) Offset { return Offset{kind: kindAt, n: n} }

// Since starts at the first message written at or after t, to the second
// (an AMQP timestamp has whole seconds; RabbitMQ starts at the chunk
// holding that moment, so a few earlier messages may come first).
func Since(t time.Time) Offset { return Offset{kind: kindSince, t: t} }

// ParseOffset reads an offset as an operator writes it: first, last,
// next, a non-negative integer offset, or an RFC 3339 time.
func ParseOffset(s string) (Offset, error) {
	switch strings.TrimSpace(s) {
	case "first":
		return First(), nil
	case "last":
		return Last(), nil
	case "next", "":
		return Next(), nil
	}
	if n, err := strconv.ParseInt(s, 10, 64); err == nil {
		if n < 0 {
			return Offset{}, fmt.Errorf("stream: the offset %d is negative: offsets count from 0", n)
		}
		return At(n), nil
	}
	if t, err := time.Parse(time.RFC3339Nano, s); err == nil {
		return Since(t), nil
	}
	return Offset{}, fmt.Errorf("stream: %q is not an offset: write first, last, next, a number from 0, or an RFC 3339 time such as 2026-01-02T15:04:05Z", s)
}

// String renders the offset as ParseOffset reads it.
func (o Offset) String() string {
	switch o.kind {
	case kindFirst:
		return "first"
	case kindLast:
		return "last"
	case kindAt:
		return strconv.FormatInt(o.n, 10)
	case kindSince:
		return o.t.UTC().Format(time.RFC3339)
	}
	return "next"
}

// arg is the x-stream-offset consumer argument for o (docs/wire.md §5.9):
// a string, an int64, or a timestamp.
func (o Offset) arg() any {
	switch o.kind {
	case kindFirst:
		return "first"
	case kindLast:
		return "last"
	case kindAt:
		return o.n
	case kindSince:
		return o.t.UTC().Truncate(time.Second)
	}
	return "next"
}
