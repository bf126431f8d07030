// Package replay is the replay command: it moves dead-lettered or parked
// messages back into circulation through package replay of the module.
package replay

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/codec/encrypted"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/replay"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// Options are replay's flags, read by NewCmd's command.
type Options struct {
	cli.Invocation

	queue         string
	toExchange    string
	toRoutingKey  string
	limit         int
	typ           string
	keepAttempts  bool
	timeout       time.Duration
	json          bool
	setExchange   bool
	setRoutingKey bool
	keyring       string
}

// replayChunk is how many messages one replay.Run moves between progress
// updates.
const replayChunk = 50

// replayJSON is what replay --json prints.
type replayJSON struct {
	Source     string `json:"source"`
	Exchange   string `json:"exchange"`
	RoutingKey string `json:"routingKey"`
	Moved      int    `json:"moved"`
	Skipped    int    `json:"skipped"`
	Reason     string `json:"reason"`
	Error      string `json:"error,omitempty"`
}

// NewCmd is the replay command. When runF is not nil it runs instead of
// the command's own run, once the flags are read and valid.
func NewCmd(runF func(*Options) error) *cobra.Command {
	f := &Options{}
	cmd := &cobra.Command{
		Use:   "replay --queue Q.dlq [--to-exchange E --to-routing-key K] [--limit N] [--type T] [--keep-attempts]",
		Short: "Move dead-lettered (or parked) messages back into circulation",
		Long: `replay moves messages out of a dead-letter queue (Q.dlq) or a parking queue
(Q.parked) back to Q through the default exchange, or to --to-exchange with
--to-routing-key. It stops when the queue is drained, --limit messages have
moved, --timeout passes, or a step fails, and prints how many it moved, how
many it skipped and why it stopped (drained, limit, deadline, cancelled,
failed).

Each message keeps its body, message id, content type, first-seen time, route
and headers; its x-acemq-error is removed, its attempt is reset to 1 (unless
--keep-attempts), and it is stamped with acemq-replayed-from, -at and -count.
Each is published confirmed and mandatory before the original is
acknowledged, so an interrupted replay can duplicate a message, never lose
one.

--type T moves only messages of envelope type T; the others are put back on
the source when the replay ends (skipped).

--keyring FILE moves only the encrypted bodies (content type
application/vnd.acemq.encrypted) the keyring opens; each one it cannot open
is reported with its key id on standard error and stays on the source
(skipped), since its consumer could not read it either. Bodies move as they
are, still encrypted; other bodies are not checked.

Exit codes: 0 drained or limit reached; 3 --timeout passed; 1 a step failed
(the message being moved was put back) or anything else.`,
		Example: `  acemq replay --queue orders.new.dlq
  acemq replay --queue orders.new.parked --type order.placed --limit 10
  acemq replay --queue orders.new.dlq --to-exchange orders --to-routing-key order.retry --keep-attempts`,
		Args: cobra.NoArgs,
		RunE: cli.RunE(f, runF),
	}
	f.addFlags(cmd)
	return cmd
}

// Complete records the command and which of the target flags were given.
func (f *Options) Complete(cmd *cobra.Command, args []string) {
	f.Invocation.Complete(cmd, args)
	f.setExchange = cmd.Flags().Changed("to-exchange")
	f.setRoutingKey = cmd.Flags().Changed("to-routing-key")
}

// addFlags defines replay's flags on cmd.
func (f *Options) addFlags(cmd *cobra.Command) {
	cli.AddBrokerFlags(cmd, cli.SharedURLDefault)
	cli.AddWaitFlag(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.queue, "queue", "", "the queue to move messages out of (Q.dlq or Q.parked)")
	fl.StringVar(&f.toExchange, "to-exchange", "", "publish to this exchange instead of Q (with --to-routing-key)")
	fl.StringVar(&f.toRoutingKey, "to-routing-key", "", "routing key to publish with (with --to-exchange)")
	fl.IntVar(&f.limit, "limit", 0, "move at most this many messages (0: no limit)")
	fl.StringVar(&f.typ, "type", "", "move only messages of this envelope type")
	fl.BoolVar(&f.keepAttempts, "keep-attempts", false, "keep each message's attempt instead of resetting it to 1")
	fl.DurationVar(&f.timeout, "timeout", 0, "stop after this long (0: no limit; Ctrl-C stops)")
	fl.BoolVar(&f.json, "json", false, "print the result as one JSON object")
	cli.AddKeyringFlag(cmd, &f.keyring)
	_ = cmd.MarkFlagRequired("queue")
}

// Validate checks the flags before anything connects.
func (f *Options) Validate() error {
	if f.limit < 0 {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--limit must not be negative, not %d", f.limit))
	}
	if f.setExchange != f.setRoutingKey {
		return cli.WithCode(cli.ExitFailure, errors.New("--to-exchange and --to-routing-key go together: give both, or neither to replay to the source's own queue"))
	}
	if !f.setExchange {
		if _, ok := replay.Target(f.queue); !ok {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("%q ends in neither .dlq nor .parked, so there is no queue to put its messages back on: give --to-exchange and --to-routing-key", f.queue))
		}
	}
	return nil
}

// Run moves the messages and reports what it did.
func (f *Options) Run() error {
	cmd := f.Cmd
	keys, err := cli.LoadKeyring(f.keyring)
	if err != nil {
		return err
	}
	ctx, cancel := cli.Within(cmd.Context(), f.timeout)
	defer cancel()
	s, err := cli.OpenSession(cmd, "")
	if err != nil {
		return err
	}
	defer s.Close()
	info, err := s.RequireQueue(ctx, f.queue, "")
	if err != nil {
		return err
	}
	bar := f.progress(info.Messages)
	res := f.move(ctx, s.Conn, f.options(keys), bar)
	if bar != nil {
		_ = bar.Finish()
	}
	if err := f.report(res); err != nil {
		return err
	}
	return f.exit(res)
}

// options are the replay options the flags ask for; with keys, only the
// bodies the keyring opens move.
func (f *Options) options(keys *encrypted.Codec) []replay.Option {
	var opts []replay.Option
	if f.setExchange {
		opts = append(opts, replay.WithTarget(f.toExchange, f.toRoutingKey))
	}
	if f.keepAttempts {
		opts = append(opts, replay.WithKeptAttempts())
	}
	if f.typ != "" {
		typ := f.typ
		opts = append(opts, replay.WithFilter(func(env acemq.Envelope) bool { return env.Type() == typ }))
	}

	if keys != nil {
		seen := 0
		stderr := f.Cmd.ErrOrStderr()
		opts = append(opts, replay.WithMessageFilter(func(m acemq.Message[[]byte]) bool {
			seen++
			o := cli.OpenBody(keys, m)
			if o.Failed() {
				cli.ReportUnopened(stderr, seen, m, o, "it stays on "+f.queue)
				return false
			}
			return true
		}))
	}
	return opts
}

// progress is the progress bar for moving up to total messages, nil when
// standard error is no terminal or the output is JSON.
func (f *Options) progress(total int) *progressbar.ProgressBar {
	if !cli.StderrIsTerminal(f.Cmd) || f.json {
		return nil
	}
	if f.limit > 0 {
		total = min(total, f.limit)
	}
	return progressbar.NewOptions(total, progressbar.OptionSetWriter(f.Cmd.ErrOrStderr()), progressbar.OptionSetDescription("replaying"),
		progressbar.OptionShowCount(), progressbar.OptionThrottle(100*time.Millisecond), progressbar.OptionClearOnFinish())
}

// move runs the replay: a filtered one (--type, --keyring) in one piece,
// the others in pieces of replayChunk, to show progress.
func (f *Options) move(ctx context.Context, conn *acemq.Conn, opts []replay.Option, bar *progressbar.ProgressBar) replay.Result {
	var res replay.Result
	if f.typ != "" || f.keyring != "" {
		// A filtered replay holds what it declines until it ends, so it
		// runs in one piece: in pieces, each would fetch the declined
		// messages again.
		if f.limit > 0 {
			opts = append(opts, replay.WithLimit(f.limit))
		}
		res, _ = replay.Run(ctx, conn, f.queue, opts...)
		if bar != nil {
			_ = bar.Add(res.Moved)
		}
	} else {
		// In pieces of replayChunk, to show progress.
		for {
			chunk := replayChunk
			if f.limit > 0 {
				chunk = min(chunk, f.limit-res.Moved)
			}
			r, _ := replay.Run(ctx, conn, f.queue, append(opts, replay.WithLimit(chunk))...)
			if bar != nil {
				_ = bar.Add(r.Moved)
			}
			res.Source, res.Exchange, res.RoutingKey = r.Source, r.Exchange, r.RoutingKey
			res.Moved += r.Moved
			res.Skipped += r.Skipped
			res.Reason, res.Err = r.Reason, r.Err
			if r.Reason != replay.LimitReached || (f.limit > 0 && res.Moved >= f.limit) {
				break
			}
		}
	}
	return res
}

// report prints what the replay did: one JSON object, or a line.
func (f *Options) report(res replay.Result) error {
	out := f.Cmd.OutOrStdout()
	if f.json {
		j := replayJSON{Source: f.queue, Exchange: res.Exchange, RoutingKey: res.RoutingKey, Moved: res.Moved, Skipped: res.Skipped, Reason: string(res.Reason)}
		if res.Err != nil {
			j.Error = res.Err.Error()
		}
		b, err := cli.MarshalLine(j)
		if err != nil {
			return err
		}
		_, _ = out.Write(b)
	} else {
		target := fmt.Sprintf("exchange %q with routing key %q", res.Exchange, res.RoutingKey)
		if res.Exchange == "" {
			target = "queue " + res.RoutingKey
		}
		fmt.Fprintf(out, "moved %d, skipped %d from %s to %s; stopped: %s\n", res.Moved, res.Skipped, f.queue, target, describeReason(res.Reason))
	}
	return nil
}

// exit is the command's outcome for why the replay stopped.
func (f *Options) exit(res replay.Result) error {
	switch res.Reason {
	case replay.Drained, replay.LimitReached:
		return nil
	case replay.DeadlineExceeded:
		return cli.WithCode(cli.ExitTimeout, fmt.Errorf("timed out after %s", f.timeout))
	case replay.Cancelled:
		return cli.WithCode(cli.ExitFailure, errors.New("interrupted"))
	}
	if res.Err != nil {
		return cli.WithCode(cli.ExitFailure, res.Err)
	}
	return cli.WithCode(cli.ExitFailure, fmt.Errorf("the replay stopped: %s", res.Reason))
}

// describeReason says why a replay stopped, in words.
func describeReason(r replay.Reason) string {
	switch r {
	case replay.Drained:
		return "drained (nothing left to move)"
	case replay.LimitReached:
		return "limit (moved as many as asked)"
	case replay.DeadlineExceeded:
		return "deadline (--timeout passed)"
	case replay.Cancelled:
		return "cancelled"
	case replay.Failed:
		return "failed (the message being moved was put back)"
	}
	return string(r)
}
