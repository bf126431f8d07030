package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
)

// retryPause is how long the control consumer holds a message whose hop or
// delivery failed (a broker nack, a lost or blocked connection) before
// putting it back on the control queue to try again.
const retryPause = time.Second

// Serve declares the scheduler's topology and starts the control consumer
// of acemq.schedule.due: every message a rung expires into it is either
// delivered — published to its x-schedule-exchange and
// x-schedule-routing-key with its x-schedule-content-type, the body
// verbatim — or, while its due time is a rung or more away, put on the
// longest rung that does not overshoot. It reads with prefetch 50, the
// bytes codec and no declarations of its own (no .dlq or .parked), as
// every language's control consumer does, so it delivers messages any of
// them scheduled, and they deliver its.
//
// Messages wait on the broker, not in the consumer: stopping it (Close)
// loses nothing; what fell due meanwhile waits on the control queue and is
// delivered when a control consumer runs again. Several may run at once,
// in one process or many. A due message that nothing routes (or whose
// exchange is missing) is held on the 1m rung and tried again; one without the scheduler's headers is
// dropped and counted (docs/scheduling.md).
func Serve(ctx context.Context, conn *acemq.Conn, opts ...ServeOption) (*acemq.Consumer, error) {
	cfg := serveConfig{concurrency: DefaultConcurrency, ladder: family}
	for _, o := range opts {
		if o != nil {
			o.applyServe(&cfg)
		}
	}
	if cfg.concurrency < 1 {
		return nil, fmt.Errorf("schedule: WithConcurrency(%d): at least one handler must run; the default is %d", cfg.concurrency, DefaultConcurrency)
	}
	m, err := newMover(conn, cfg.ladder)
	if err != nil {
		return nil, err
	}
	if err := cfg.ladder.topology().Apply(ctx, conn); err != nil {
		return nil, fmt.Errorf("schedule: declaring the scheduler's exchange and queues: %w", err)
	}
	c := &controller{m: m}
	return acemq.Consume(ctx, conn, cfg.ladder.due, c.handle,
		acemq.WithCodec(acemq.Bytes),
		acemq.WithPrefetch(ControlPrefetch),
		acemq.WithDeclarations(false),
		acemq.WithConcurrency(cfg.concurrency))
}

// controller is the control consumer's handler.
type controller struct{ m *mover }

func (c *controller) handle(ctx context.Context, msg acemq.Message[[]byte]) acemq.Ack {
	j, err := readJob(msg.Envelope.Headers())
	if err != nil {
		// Nothing says where it goes: with no .dlq to set it aside in, a
		// reject would come straight back. Dropped, and counted.
		c.m.rec.failed(ctx, "malformed")
		return acemq.Accept()
	}
	now := c.m.now()
	if r, hop := c.m.ladder.next(j.due.Sub(now)); hop {
		if err := c.m.hopTo(ctx, r, msg.Envelope, j, msg.Body); err != nil {
			return acemq.InProgress(retryPause)
		}
		return acemq.Accept()
	}
	env, err := deliveredEnvelope(msg.Envelope, j, now)
	if err != nil {
		c.m.rec.failed(ctx, "malformed")
		return acemq.Accept()
	}
	err = c.m.deliver(ctx, env, j, msg.Body, now)
	var ue *driver.ReturnError
	switch {
	case err == nil:
		return acemq.Accept()
	case errors.As(err, &ue), errors.Is(err, acemq.ErrNotFound):
		// Nothing is bound for the target, or its exchange is missing
		// (yet): hold it on a rung and try again, rather than lose it or
		// retry it every second.
		reason := "unroutable"
		if ue == nil {
			reason = "no_exchange"
		}
		c.m.rec.failed(ctx, reason)
		if err := c.m.hopTo(ctx, c.m.ladder.hold, msg.Envelope, j, msg.Body); err != nil {
			return acemq.InProgress(retryPause)
		}
		return acemq.Accept()
	default:
		return acemq.InProgress(retryPause)
	}
}
