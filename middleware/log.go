package middleware

import (
	"context"
	"log/slog"
	"time"

	"github.com/acemq/acemq"
)

// Log writes one line to l for every message, after the handler (and the
// middleware inside this one) returned: at Info for an accept, at Warn for
// every other decision, with the handler's error. Its attributes are the
// envelope's fields and where the message came from: queue, exchange,
// routing.key, message.id, message.type, correlation.id, causation.id,
// origin, attempt, redelivered, decision, duration and error.
//
// It never logs header values or the body, which may carry what must not
// be in a log. The line is the handler's decision, not the engine's
// outcome (a retry on the last attempt is dead-lettered): for outcomes,
// read the settlements (Conn.OnSettle). A nil l logs nothing.
func Log[T any](l *slog.Logger) acemq.Middleware[T] {
	return func(next acemq.Handler[T]) acemq.Handler[T] {
		if l == nil {
			return next
		}
		return func(ctx context.Context, m acemq.Message[T]) acemq.Ack {
			start := time.Now()
			ack := next(ctx, m)
			level := slog.LevelInfo
			if ack.Decision() != acemq.DecisionAccept {
				level = slog.LevelWarn
			}
			if !l.Enabled(ctx, level) {
				return ack
			}
			env := m.Envelope
			attrs := []slog.Attr{
				slog.String("queue", m.Queue),
				slog.String("exchange", m.Exchange),
				slog.String("routing.key", m.RoutingKey),
				slog.String("message.id", env.ID()),
				slog.String("message.type", env.Type()),
				slog.String("correlation.id", env.CorrelationID()),
				slog.String("causation.id", env.CausationID()),
				slog.String("origin", env.Origin()),
				slog.Int("attempt", env.Attempt()),
				slog.Bool("redelivered", m.Redelivered),
				slog.String("decision", ack.Decision().String()),
				slog.Duration("duration", time.Since(start)),
			}
			if err := ack.Err(); err != nil {
				attrs = append(attrs, slog.String("error", err.Error()))
			}
			l.LogAttrs(ctx, level, "acemq: handled a message", attrs...)
			return ack
		}
	}
}
