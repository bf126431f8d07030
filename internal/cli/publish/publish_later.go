package publish

import (
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/schedule"
	"github.com/spf13/cobra"
	"github.com/spf13/pflag"
)

// laterFlags are publish's time flags: --delay and --at schedule the
// message; --ttl and --priority are per-message properties.
type laterFlags struct {
	delay    time.Duration
	at       string
	ttl      time.Duration
	priority int
}

func (l *laterFlags) add(fl *pflag.FlagSet) {
	fl.DurationVar(&l.delay, "delay", 0, "schedule the message for delivery this long from now (for example 90s, 4h) through the broker's scheduler")
	fl.StringVar(&l.at, "at", "", "schedule the message for delivery at this RFC 3339 time (for example 2026-12-01T09:00:00Z)")
	fl.DurationVar(&l.ttl, "ttl", 0, "per-message time to live: the message expires if still on a queue this long after it got there (0: none)")
	fl.IntVar(&l.priority, "priority", 0, "message priority 0-255, honoured by queues declared with x-max-priority (0: none)")
}

func (l *laterFlags) scheduled() bool { return l.delay != 0 || l.at != "" }

// check refuses combinations the scheduler cannot honour.
func (l *laterFlags) check(f Options) error {
	switch {
	case l.delay < 0:
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--delay must not be negative, not %s", l.delay))
	case l.delay != 0 && l.at != "":
		return cli.WithCode(cli.ExitFailure, errors.New("--delay and --at both say when: give one"))
	case l.ttl < 0:
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--ttl must not be negative, not %s", l.ttl))
	case l.priority < 0 || l.priority > 255:
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--priority must be from 0 to 255, not %d", l.priority))
	case f.count > 1 && (l.ttl != 0 || l.priority != 0 || l.scheduled()):
		return cli.WithCode(cli.ExitFailure, errors.New("--count cannot be combined with --ttl, --priority, --delay or --at: send one message at a time"))
	case l.scheduled() && (l.ttl != 0 || l.priority != 0 || f.transient):
		return cli.WithCode(cli.ExitFailure, errors.New("a scheduled message (--delay, --at) cannot carry --ttl, --priority or --transient: the scheduler's rungs would not keep them"))
	}
	if l.at != "" {
		if _, err := time.Parse(time.RFC3339, l.at); err != nil {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("--at %q is not an RFC 3339 time such as 2026-12-01T09:00:00Z: %w", l.at, err))
		}
	}
	return nil
}

// sendOptions are the per-message options --ttl and --priority ask for.
func (l *laterFlags) sendOptions() []acemq.SendOption {
	var out []acemq.SendOption
	if l.ttl > 0 {
		out = append(out, acemq.WithExpiration(l.ttl))
	}
	if l.priority > 0 {
		out = append(out, acemq.WithPriority(uint8(l.priority)))
	}
	return out
}

// when is the due time --delay or --at asks for.
func (l *laterFlags) when() time.Time {
	if l.at != "" {
		t, _ := time.Parse(time.RFC3339, l.at) // checked
		return t
	}
	return time.Now().Add(l.delay)
}

// runSchedule schedules one message and prints its id.
func runSchedule(cmd *cobra.Command, f Options, headers map[string]any, body []byte) error {
	ctx, cancel := cli.Within(cmd.Context(), f.timeout)
	defer cancel()
	s, err := cli.OpenSession(cmd, "")
	if err != nil {
		return err
	}
	defer s.Close()
	env, err := acemq.NewEnvelope(acemq.Fields{Type: f.typ, CorrelationID: f.correlationID, CausationID: f.causationID, Headers: headers})
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	at := f.later.when()
	p := schedule.NewPublisher[[]byte](s.Conn, f.exchange, schedule.WithCodec(cli.RawCodec{Type: f.ct}))
	sent, err := p.SendAt(ctx, f.routingKey, at, body, schedule.WithEnvelope(env))
	if err != nil {
		return publishError(ctx, s, err)
	}
	fmt.Fprintln(cmd.OutOrStdout(), sent.ID())
	if time.Until(at) >= time.Second {
		fmt.Fprintf(cmd.ErrOrStderr(), "scheduled for %s; delivered by a running 'acemq serve --scheduler'%s\n", at.UTC().Format(time.RFC3339), s.Hint())
	}
	return nil
}
