package acemq

import (
	"log/slog"
	"net/url"
	"regexp"

	"github.com/acemq/acemq/driver"
)

// Logging (docs/pipeline.md#logging): a connection logs what an operator
// needs through the *slog.Logger given with WithLogger, and nothing per
// message. Without WithLogger nothing is logged at all.

// discardLogger is the logger of a connection opened without WithLogger.
var discardLogger = slog.New(slog.DiscardHandler)

// newConnLogger is the connection's logger: l with the connection's name
// and redacted URL, or one that discards everything.
func newConnLogger(l *slog.Logger, name, redactedURL string) *slog.Logger {
	if l == nil {
		return discardLogger
	}
	attrs := []any{slog.String("acemq.url", redactedURL)}
	if name != "" {
		attrs = append(attrs, slog.String("acemq.connection", name))
	}
	return l.With(attrs...)
}

// userinfo finds user:password@ in URLs quoted inside error texts.
var userinfo = regexp.MustCompile(`([a-zA-Z][a-zA-Z0-9+.-]*://)[^/@\s"']*@`)

// safeErr is err's text for a log: URLs in it have their credentials
// redacted.
func safeErr(err error) slog.Attr {
	if err == nil {
		return slog.Attr{}
	}
	text := driver.Redact(err).Error()
	text = userinfo.ReplaceAllStringFunc(text, func(m string) string {
		u, perr := url.Parse(m + "x")
		if perr != nil || u.User == nil {
			return userinfo.ReplaceAllString(m, "${1}xxxxx@")
		}
		if _, has := u.User.Password(); has {
			return u.Scheme + "://" + u.User.Username() + ":xxxxx@"
		}
		return m
	})
	return slog.String("error", text)
}

// logEvent logs a connection state transition.
func (c *Conn) logEvent(e driver.Event) {
	l := c.log
	switch e.Kind {
	case driver.EventLost:
		l.Warn("acemq: the connection to the broker was lost; recovering in the background", safeErr(e.Err))
	case driver.EventRetrying:
		l.Info("acemq: reconnecting to the broker", slog.Int("attempt", e.Attempt), slog.Duration("delay", e.Delay), safeErr(e.Err))
	case driver.EventRecovered:
		l.Info("acemq: the connection to the broker recovered", slog.Int("attempt", e.Attempt))
	case driver.EventRedeclared:
		l.Info("acemq: redeclared the connection's topology after recovering", slog.Int("attempt", e.Attempt))
	case driver.EventBlocked:
		l.Warn("acemq: the broker blocked this connection; publishing is paused", slog.String("reason", e.Reason))
	case driver.EventUnblocked:
		l.Info("acemq: the broker unblocked this connection; publishing resumed")
	}
}

// logSettlement logs a settlement an operator must hear of: a set-aside
// whose target was missing, or a delivery the engine could not settle as
// decided and put back. Every other settlement logs nothing.
func (c *Conn) logSettlement(s *Settlement) {
	switch {
	case s.SetAsideFailed != "":
		c.log.Error("acemq: a message could not be set aside because its target queue is missing; it was put back on its queue",
			slog.String("queue", s.Queue), slog.String("target", s.SetAsideFailed), slog.String("message.id", s.Envelope.ID()), safeErr(s.SettleErr))
	case s.Outcome == OutcomeRequeued && s.SettleErr != nil:
		c.log.Warn("acemq: a message could not be settled as decided; it was put back on its queue",
			slog.String("queue", s.Queue), slog.String("decision", s.Decision.String()), slog.String("message.id", s.Envelope.ID()), safeErr(s.SettleErr))
	}
}
