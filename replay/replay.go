// Package replay moves messages out of a dead-letter queue ({q}.dlq) or a
// parking queue ({q}.parked) back to where they belong, by default the
// source queue {q} through the default exchange (docs/wire.md §9.6).
//
// Each moved message keeps its body, message-id, content type, first-seen
// time, route and every header (unknown x-acemq-* headers included), has
// x-acemq-error removed and its attempt reset to 1 (unless WithKeptAttempts),
// and is stamped with acemq-replayed-from, acemq-replayed-at and
// acemq-replay-count. Each move is published persistent, mandatory and
// confirmed before the original is acknowledged, so a replay that is
// interrupted — by its deadline, a cancelled context, a crash or a broker
// failure — can duplicate a message but never lose one.
//
// A message the filter declines is held, unacknowledged, until the replay
// ends, and then every held message is put back (nack with requeue) at
// once. Putting each back as it is declined would return it to the head of
// the queue, where the next fetch would take it again, endlessly.
package replay

import (
	"context"
	"errors"
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/queues"
)

// Reason says why a replay stopped.
type Reason string

// The reasons a replay stops (docs/wire.md §9.6).
const (
	// Drained: the source queue had nothing more to fetch.
	Drained Reason = "drained"
	// LimitReached: the limit of moved messages was reached.
	LimitReached Reason = "limit"
	// DeadlineExceeded: the context's deadline passed.
	DeadlineExceeded Reason = "deadline"
	// Cancelled: the context was cancelled.
	Cancelled Reason = "cancelled"
	// Failed: a fetch, publish or acknowledgement failed; Result.Err says
	// which. The message being moved was put back.
	Failed Reason = "failed"
)

// The headers a replay stamps on every message it moves (docs/wire.md
// §3.2, §9.6).
const (
	HeaderReplayedFrom = wire.HeaderReplayedFrom
	HeaderReplayedAt   = wire.HeaderReplayedAt
	HeaderReplayCount  = wire.HeaderReplayCount
)

// legacyReplayCount is the reserved spelling of the replay count that Java
// up to 0.4 and .NET up to 0.5.0 wrote. It is read as a fallback and carried
// through, never written.
const legacyReplayCount = "x-acemq-replay-count"

// ReplayedAtLayout is how acemq-replayed-at is written: RFC 3339, UTC,
// milliseconds, Z.
const ReplayedAtLayout = "2006-01-02T15:04:05.000Z"

// Result is what a replay did.
type Result struct {
	// Source is the queue messages were moved from.
	Source string
	// Exchange and RoutingKey are where they were published.
	Exchange   string
	RoutingKey string
	// Moved counts messages published to the target and acknowledged on
	// the source (or, when Reason is Failed because an acknowledgement
	// failed, published but still on the source).
	Moved int
	// Skipped counts messages the filter declined; they were put back.
	Skipped int
	// Reason is why the replay stopped.
	Reason Reason
	// Err is set when Reason is Failed.
	Err error
}

// String summarises the replay in one line: how many moved, from where to
// where, how many were skipped, why it stopped and any error.
func (r Result) String() string {
	s := fmt.Sprintf("replayed %d from %s to exchange %q routing key %q (%d skipped): %s", r.Moved, r.Source, r.Exchange, r.RoutingKey, r.Skipped, r.Reason)
	if r.Err != nil {
		s += ": " + r.Err.Error()
	}
	return s
}

// Target is where a replay from source publishes by default: the queue
// source names without its .dlq or .parked suffix, through the default
// exchange. ok is false for a source with neither suffix.
func Target(source string) (queue string, ok bool) {
	for _, suffix := range []string{".dlq", ".parked"} {
		if q, found := strings.CutSuffix(source, suffix); found && q != "" {
			return q, true
		}
	}
	return "", false
}

// Run moves messages from the queue source (usually contract.DeadLetterQueue(q)
// or contract.ParkedQueue(q)) to their target, one at a time, until the source
// is drained, the limit is reached, ctx ends, or a step fails. It fetches
// with basic.get and never consumes, so it does not compete with the
// prefetch of a consumer on the source (there should be none).
//
// It reads the source with a queues.Browser, so what it holds is
// invisible to consumers until it moves or is put back.
//
// The error is Result.Err (nil unless Reason is Failed), also returned as a
// value so that it is hard to ignore; invalid arguments return an error and
// a zero Result.
func Run(ctx context.Context, conn *acemq.Conn, source string, opts ...Option) (Result, error) {
	cfg := config{now: time.Now}
	for _, o := range opts {
		o.apply(&cfg)
	}
	if conn == nil {
		return Result{}, errors.New("replay: Run needs a connection")
	}
	if source == "" {
		return Result{}, errors.New("replay: Run needs a source queue, for example contract.DeadLetterQueue(\"orders.new\")")
	}
	if cfg.limit < 0 {
		return Result{}, fmt.Errorf("replay: WithLimit(%d): the limit must be 0 (none) or more", cfg.limit)
	}
	if !cfg.targetSet {
		q, ok := Target(source)
		if !ok {
			return Result{}, fmt.Errorf("replay: %q does not end in .dlq or .parked, so the target is not known: name one with replay.WithTarget", source)
		}
		cfg.exchange, cfg.routingKey = "", q
	}
	res := Result{Source: source, Exchange: cfg.exchange, RoutingKey: cfg.routingKey}
	b, err := queues.Browse(ctx, conn, source)
	if err != nil {
		res.Reason, res.Err = stopReason(ctx, fmt.Errorf("replay: the source queue %q: %w", source, err))
		return res, res.Err
	}
	// Closing the browser puts back what the filter declined, all at once,
	// now that nothing will fetch again.
	defer b.Close()

	for {
		if cfg.limit > 0 && res.Moved >= cfg.limit {
			res.Reason = LimitReached
			return res, nil
		}
		if ctx.Err() != nil {
			res.Reason, _ = stopReason(ctx, nil)
			return res, nil
		}
		m, ok, err := b.Next(ctx)
		if err != nil {
			res.Reason, res.Err = stopReason(ctx, fmt.Errorf("replay: fetching from %q: %w", source, err))
			return res, res.Err
		}
		if !ok {
			res.Reason = Drained
			return res, nil
		}
		env := m.Envelope
		if (cfg.filter != nil && !cfg.filter(env)) || (cfg.messageFilter != nil && !cfg.messageFilter(m.Message)) {
			res.Skipped++
			continue
		}
		next, err := cfg.stamp(env, source)
		if err != nil {
			res.Reason, res.Err = Failed, err
			return res, err
		}
		if err := b.Move(ctx, m, cfg.exchange, cfg.routingKey, next); err != nil {
			if errors.Is(err, queues.ErrNotTaken) {
				// Published, but it stays on the source too: a later replay
				// moves it again.
				res.Moved++
				res.Reason, res.Err = Failed, fmt.Errorf("replay: %w", err)
				return res, res.Err
			}
			// Not confirmed (or unroutable): the original goes back when the
			// browser closes. A publish that reached the broker without a
			// confirm arriving becomes a duplicate, never a loss.
			res.Reason, res.Err = stopReason(ctx, fmt.Errorf("replay: %w", err))
			return res, res.Err
		}
		res.Moved++
	}
}

// stopReason classifies a stop: the context's end wins over the error it
// caused.
func stopReason(ctx context.Context, err error) (Reason, error) {
	switch {
	case errors.Is(ctx.Err(), context.DeadlineExceeded):
		return DeadlineExceeded, nil
	case ctx.Err() != nil:
		return Cancelled, nil
	}
	return Failed, err
}

// stamp builds the envelope of a moved message (docs/wire.md §9.6): the
// message's own, its reason removed, its attempt reset (unless kept), the
// replay headers stamped.
func (cfg *config) stamp(env acemq.Envelope, source string) (acemq.Envelope, error) {
	prev, ok := env.Header(HeaderReplayCount)
	if !ok {
		// An unknown reserved header is not an application header, but the
		// envelope carries it and writes it back.
		prev, ok = env.AppendHeaders(nil, "")[legacyReplayCount]
	}
	var count int64
	if ok {
		if n, readable := wire.Int(prev); readable && n > 0 {
			count = n
		}
	}
	if count < math.MaxInt64 {
		count++
	}
	var countValue any = count // 64-bit only when 32 bits cannot hold it
	if count <= math.MaxInt32 {
		countValue = int32(count)
	}
	next, err := env.Change(func(f *acemq.Fields) {
		f.Reason = ""
		if !cfg.keepAttempts {
			f.Attempt = 1
		}
		f.Headers[HeaderReplayedFrom] = source
		f.Headers[HeaderReplayedAt] = cfg.now().UTC().Format(ReplayedAtLayout)
		f.Headers[HeaderReplayCount] = countValue
	})
	if err != nil {
		return env, fmt.Errorf("replay: message %s: %w", env.ID(), err)
	}
	return next, nil
}
