package schedule

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/plumbing"
)

// mover publishes scheduled messages for a Publisher and the control
// consumer: onto a rung, or to their target. Every publish goes through
// the connection's one publish path, persistent, mandatory and confirmed.
type mover struct {
	conn   *acemq.Conn
	pl     *plumbing.Conn
	ladder ladder
	rec    *recorder
}

func newMover(conn *acemq.Conn, l ladder) (*mover, error) {
	pl := plumbing.ConnOf(conn)
	if pl == nil {
		return nil, errors.New("schedule: no connection was given: pass the *acemq.Conn from acemq.Connect")
	}
	return &mover{conn: conn, pl: pl, ladder: l, rec: newRecorder(pl)}, nil
}

// now is the time on the connection's clock: real time, or a memory://
// broker's test clock.
func (m *mover) now() time.Time { return m.conn.Clock().Now() }

// hopTo publishes body onto rung r, with env's envelope and j's
// x-schedule-* headers.
func (m *mover) hopTo(ctx context.Context, r rung, env acemq.Envelope, j job, body []byte) error {
	err := m.pl.Publish(ctx, plumbing.Message{
		Exchange:      m.ladder.exchange,
		RoutingKey:    r.name,
		Mandatory:     true,
		AlwaysConfirm: true,
		ContentType:   octetStream,
		MessageID:     env.ID(),
		Headers:       hopHeaders(env, j),
		Body:          body,
	})
	if err != nil {
		return fmt.Errorf("schedule: putting message %s on the rung %s: %w", env.ID(), r.name, err)
	}
	m.rec.hop(ctx, r)
	return nil
}

// deliver publishes body to j's target with env, under j's content type.
func (m *mover) deliver(ctx context.Context, env acemq.Envelope, j job, body []byte, now time.Time) error {
	err := m.pl.Publish(ctx, plumbing.Message{
		Exchange:      j.exchange,
		RoutingKey:    j.routingKey,
		Mandatory:     true,
		AlwaysConfirm: true,
		ContentType:   j.contentType,
		MessageID:     env.ID(),
		Headers:       env.AppendHeaders(nil, j.routingKey),
		Body:          body,
	})
	if err != nil {
		return fmt.Errorf("schedule: delivering message %s to exchange %q with routing key %q: %w", env.ID(), j.exchange, j.routingKey, err)
	}
	m.rec.deliveredOne(ctx, j, now)
	return nil
}
