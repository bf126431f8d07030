package engine

import (
	"context"
	"iter"
	"time"

	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/fifo"
)

// Draft is one message of a sequence publish as its producer made it: the
// driver message and its envelope (E: package acemq's Envelope), or why it
// could not be made.
type Draft[E any] struct {
	M   driver.Message
	Env E
	Err error
}

// sent is a message of a sequence publish awaiting its result: its
// envelope and, when it went through the telemetry, its telemetry's end
// and when it was published.
type sent[E any] struct {
	env   E
	done  func(error, time.Duration)
	start time.Time
}

// PublishSeq publishes each message drafts yields (a draft with Err set is
// not published) and calls result once for each, in order, with its
// envelope and its error (nil for confirmed). drafts may yield the same
// draft every time: it is read before the next is asked for. On a
// driver.EachPublisher the confirm window slides inside the sequence and a
// result is reported when drafts yields its next message or ends; it stops
// taking drafts when ctx ends. Else each message is published and
// confirmed before the next is taken. unsent makes the error of a message
// left unpublished when ctx ended (the caller's package names it).
func PublishSeq[E any](ctx context.Context, c *Conn, drafts iter.Seq[*Draft[E]], id func(*E) Identity, unsent func(cause error) error, result func(E, error)) {
	ep, ok := c.t.(driver.EachPublisher)
	if !ok {
		for d := range drafts {
			err := d.Err
			if err == nil && ctx.Err() != nil {
				err = unsent(context.Cause(ctx))
			}
			if err == nil {
				err = c.PublishAs(ctx, d.M, id(&d.Env))
			}
			result(d.Env, err)
			if ctx.Err() != nil {
				break
			}
		}
		return
	}
	var waiting fifo.Queue[sent[E]]
	ep.PublishEach(ctx, func(yield func(*driver.Message, error) bool) {
		for d := range drafts {
			if d.Err != nil {
				waiting.Push(sent[E]{env: d.Env})
				if !yield(nil, d.Err) {
					return
				}
				continue
			}
			if !c.hooked(ctx) {
				waiting.Push(sent[E]{env: d.Env})
			} else {
				var done func(error, time.Duration)
				_, d.M, done = c.tel.PublishStart(ctx, d.M, id(&d.Env))
				waiting.Push(sent[E]{env: d.Env, done: done, start: time.Now()})
			}
			if !yield(&d.M, nil) {
				return
			}
		}
	}, func(err error) {
		s := waiting.Pop()
		if s.done != nil {
			s.done(err, time.Since(s.start))
		}
		result(s.env, err)
	})
}

// PublishEach publishes n messages, message i made by build, then awaits
// every confirm, and returns one error per message: build's for a message
// that could not be made (nothing was published for it), else its
// publish's. When the driver takes a sequence (driver.EachPublisher), each
// is made just before it is sent; else all are made first and published
// with PublishBatchAs. id gives an envelope's identity for its span.
func PublishEach[E any](ctx context.Context, c *Conn, n int, build func(i int) (driver.Message, E, error), id func(*E) Identity, unsent func(cause error) error) []error {
	if _, ok := c.t.(driver.EachPublisher); !ok {
		return buildThenPublish(ctx, c, n, build, id)
	}
	errs := make([]error, 0, n)
	var d Draft[E]
	PublishSeq(ctx, c, func(yield func(*Draft[E]) bool) {
		for i := range n {
			d.M, d.Env, d.Err = build(i)
			if !yield(&d) {
				return
			}
		}
	}, id, unsent, func(_ E, err error) { errs = append(errs, err) })
	// The driver stops taking messages when ctx ends.
	for len(errs) < n {
		errs = append(errs, unsent(context.Cause(ctx)))
	}
	return errs
}

// buildThenPublish is PublishEach for a driver without
// driver.EachPublisher: every message is made, then those that could be
// are published with PublishBatchAs.
func buildThenPublish[E any](ctx context.Context, c *Conn, n int, build func(i int) (driver.Message, E, error), id func(*E) Identity) []error {
	errs := make([]error, n)
	out := make([]driver.Message, 0, n)
	envs := make([]E, 0, n)
	// idx maps out to the messages once one could not be made; until then
	// out[j] is message j.
	var idx []int
	for i := range n {
		m, env, err := build(i)
		if err != nil {
			if idx == nil {
				idx = make([]int, len(out), n)
				for j := range idx {
					idx[j] = j
				}
			}
			errs[i] = err
			continue
		}
		if idx != nil {
			idx = append(idx, i)
		}
		out = append(out, m)
		envs = append(envs, env)
	}
	if len(out) == 0 {
		return errs
	}
	for j, err := range c.PublishBatchAs(ctx, out, func(j int) Identity { return id(&envs[j]) }) {
		if idx != nil {
			errs[idx[j]] = err
		} else {
			errs[j] = err
		}
	}
	return errs
}
