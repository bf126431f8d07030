// Package serve is the serve command: it answers requests on a queue by
// running a command per request, or with --scheduler runs the scheduler's
// control consumer.
package serve

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/exec"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/cli/reasons"
	"github.com/acemq/acemq/rpc"
	"github.com/acemq/acemq/topology"
	"github.com/spf13/cobra"
)

// Options are serve's flags and arguments, read by NewCmd's command.
type Options struct {
	cli.Invocation
	path string // COMMAND, looked up in $PATH

	queue          string
	concurrency    int
	declare        bool
	ct             string
	commandTimeout time.Duration
	drain          time.Duration
	json           bool
	metricsAddr    string
	scheduler      bool
}

// long is the command's help.
const long = `serve answers each request arriving on a queue by running COMMAND with the
request body on standard input. What the command writes on standard output
is the reply. A command that exits non-zero is answered with an error
carrying the last line of its standard error (the caller sees
"CommandError: <line>" and 'acemq ask' exits 2), and the request is
dead-lettered to Q.dlq like any failed request.

The command's standard error is passed through to serve's. It also gets the
request's envelope in its environment: ACEMQ_MESSAGE_ID, ACEMQ_CORRELATION_ID,
ACEMQ_CAUSATION_ID, ACEMQ_TYPE, ACEMQ_ATTEMPT, ACEMQ_ROUTING_KEY and
ACEMQ_CONTENT_TYPE.

Replies are sent with --content-type (default application/json). With
--declare the queue is declared first (durable, quorum); otherwise it must
exist. Like every consumer, serve declares Q.dlq and Q.parked.

SIGINT or SIGTERM stops taking requests, lets the running commands finish
(up to --drain), and prints the counters: answered, failed, unanswerable.

serve --scheduler runs the scheduler's control consumer instead (no --queue,
no COMMAND): it declares the acemq.schedule exchange and rungs and the
acemq.schedule.due control queue, and delivers every scheduled message that
falls due ('acemq publish --delay' or any language's scheduler), or puts it on
the next rung. Messages wait on the broker, so stopping it loses nothing:
what fell due meanwhile is delivered when it runs again. On SIGINT or SIGTERM
it prints how many messages it handled ({"handled": N} with --json).`

// NewCmd is the serve command. When runF is not nil it runs instead of
// the command's own run, once the flags are read and valid.
func NewCmd(runF func(*Options) error) *cobra.Command {
	f := &Options{}
	cmd := &cobra.Command{
		Use:   "serve --queue Q [--concurrency N] [--declare] -- COMMAND [ARGS...] | serve --scheduler",
		Short: "Answer requests on a queue by running a command, or run the scheduler",
		Long:  long,
		Example: `  acemq serve --queue pricing --declare -- jq -c '{pence: 250, sku: .sku}'
  acemq serve --queue shout --concurrency 4 -- tr a-z A-Z
  acemq serve --scheduler --metrics-addr 127.0.0.1:9464`,
		Args: func(cmd *cobra.Command, args []string) error {
			if f.scheduler {
				if len(args) > 0 || f.queue != "" {
					return cli.WithCode(cli.ExitFailure, errors.New("serve --scheduler takes neither --queue nor a COMMAND: it reads acemq.schedule.due"))
				}
				return nil
			}
			if f.queue == "" {
				return cli.WithCode(cli.ExitFailure, errors.New(`required flag(s) "queue" not set`))
			}
			if len(args) == 0 {
				return cli.WithCode(cli.ExitFailure, errors.New("serve needs a COMMAND after --, for example: acemq serve --queue q -- cat"))
			}
			return nil
		},
		RunE: cli.RunE(f, runF),
	}
	f.addFlags(cmd)
	return cmd
}

// addFlags defines serve's flags on cmd.
func (f *Options) addFlags(cmd *cobra.Command) {
	cli.AddBrokerFlags(cmd, cli.SharedURLDefault)
	cli.AddWaitFlag(cmd)
	fl := cmd.Flags()
	fl.StringVar(&f.queue, "queue", "", "queue to answer requests on")
	fl.IntVar(&f.concurrency, "concurrency", 1, "requests handled at once")
	fl.BoolVar(&f.declare, "declare", false, "declare the queue (durable, quorum) before serving")
	fl.StringVar(&f.ct, "content-type", "application/json", "content type of the replies")
	fl.DurationVar(&f.commandTimeout, "command-timeout", 0, "kill a command running longer than this and answer with an error (0: no limit)")
	fl.DurationVar(&f.drain, "drain", acemq.DefaultDrainTimeout, "on SIGINT/SIGTERM, how long running commands may take to finish")
	fl.BoolVar(&f.json, "json", false, "print the final counters as one JSON object")
	cli.AddMetricsFlag(fl, &f.metricsAddr)
	fl.BoolVar(&f.scheduler, "scheduler", false, "run the scheduler's control consumer (acemq.schedule.due) instead of answering requests")
}

// serveCounters are what serve reports when it stops.
type serveCounters struct {
	Answered     int64 `json:"answered"`
	Failed       int64 `json:"failed"`
	Unanswerable int64 `json:"unanswerable"`
}

// Validate checks the flags and finds COMMAND before anything connects.
func (f *Options) Validate() error {
	if f.concurrency < 1 {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("--concurrency must be at least 1, not %d", f.concurrency))
	}
	if f.scheduler {
		return nil
	}
	path, err := exec.LookPath(f.Args[0])
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("cannot run %q: %w", f.Args[0], err))
	}
	f.path = path
	return nil
}

// Run answers requests (or, with --scheduler, runs the scheduler) until
// SIGINT or SIGTERM.
func (f *Options) Run() error {
	if f.scheduler {
		return runScheduler(f.Cmd, *f)
	}
	return f.answer()
}

// answer answers requests on the queue until SIGINT or SIGTERM, or until
// the responder stops, then prints the counters.
func (f *Options) answer() error {
	cmd := f.Cmd
	s, err := cli.OpenSession(cmd, f.metricsAddr)
	if err != nil {
		return err
	}
	defer s.Close()
	ctx, cancel := context.WithTimeout(cmd.Context(), cli.ConnectTimeout)
	defer cancel()
	if err := f.ensureQueue(ctx, s); err != nil {
		return err
	}
	errOut := &lockedWriter{w: cmd.ErrOrStderr()}
	if cli.IsMemory(s.URL) {
		fmt.Fprintf(errOut, "note: %s\n", cli.MemoryNote(s.URL))
	}
	var failed atomic.Int64
	h := func(hctx context.Context, m acemq.Message[[]byte]) ([]byte, error) {
		out, err := runCommand(hctx, f.path, f.Args, m, f.commandTimeout, errOut)
		if err != nil {
			failed.Add(1)
		}
		return out, err
	}
	resp, err := rpc.Serve(ctx, s.Conn, f.queue, h,
		acemq.WithCodec(cli.RawCodec{Type: f.ct}), acemq.WithConcurrency(f.concurrency),
		acemq.WithPrefetch(max(f.concurrency, 1)), acemq.WithDrainTimeout(f.drain))
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("starting the responder on %s: %w", f.queue, err))
	}
	fmt.Fprintf(errOut, "serving %s with %s (concurrency %d); SIGINT or SIGTERM stops\n", f.queue, strings.Join(f.Args, " "), f.concurrency)
	return f.stop(resp, &failed, errOut)
}

// ensureQueue declares the queue (--declare) or checks that it exists.
func (f *Options) ensureQueue(ctx context.Context, s *cli.Session) error {
	if f.declare {
		// A durable queue: a quorum queue, as the topology's are by default.
		if err := topology.New().Queue(f.queue).Apply(ctx, s.Conn); err != nil {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("declaring %s: %w", f.queue, err))
		}
		return nil
	}
	_, err := s.RequireQueue(ctx, f.queue, " (use --declare to create it)")
	return err
}

// stop waits for SIGINT or SIGTERM (or the responder's end), lets the
// running commands finish, and prints the counters.
func (f *Options) stop(resp *rpc.Responder, failed *atomic.Int64, errOut io.Writer) error {
	cmd := f.Cmd
	var stopErr error
	select {
	case <-cmd.Context().Done():
	case <-resp.Done():
		stopErr = fmt.Errorf("the responder on %s stopped (was the queue deleted?)", f.queue)
	}
	dctx, dcancel := context.WithTimeout(context.Background(), f.drain+5*time.Second)
	defer dcancel()
	if err := resp.Close(dctx); err != nil {
		fmt.Fprintf(errOut, "acemq: stopping the responder: %v\n", err)
	}
	c := serveCounters{Answered: resp.Answered(), Failed: failed.Load(), Unanswerable: resp.Unanswerable()}
	if f.json {
		b, _ := cli.MarshalLine(c)
		_, _ = cmd.OutOrStdout().Write(b)
	} else {
		fmt.Fprintf(cmd.OutOrStdout(), "answered %d, failed %d, unanswerable %d\n", c.Answered, c.Failed, c.Unanswerable)
	}
	if stopErr != nil {
		return cli.WithCode(cli.ExitFailure, stopErr)
	}
	return nil
}

// runCommand runs the command for one request.
func runCommand(ctx context.Context, path string, args []string, m acemq.Message[[]byte], timeout time.Duration, errOut io.Writer) ([]byte, error) {
	if timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, timeout)
		defer cancel()
	}
	c := exec.CommandContext(ctx, path, args[1:]...)
	c.Stdin = bytes.NewReader(m.Payload)
	var stdout bytes.Buffer
	tail := &tailBuffer{max: 4096}
	c.Stdout = &stdout
	c.Stderr = io.MultiWriter(tail, errOut)
	env := m.Envelope
	c.Env = append(os.Environ(),
		"ACEMQ_MESSAGE_ID="+env.ID(),
		"ACEMQ_CORRELATION_ID="+env.CorrelationID(),
		"ACEMQ_CAUSATION_ID="+env.CausationID(),
		"ACEMQ_TYPE="+env.Type(),
		"ACEMQ_ATTEMPT="+strconv.Itoa(env.Attempt()),
		"ACEMQ_ROUTING_KEY="+m.RoutingKey,
		"ACEMQ_CONTENT_TYPE="+m.ContentType,
	)
	c.WaitDelay = 5 * time.Second
	detachSignals(c)
	err := c.Run()
	if err == nil {
		return stdout.Bytes(), nil
	}
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		line := tail.lastLine()
		switch {
		case ctx.Err() == context.DeadlineExceeded && timeout > 0:
			line = fmt.Sprintf("%s was killed after running for %s", args[0], timeout)
		case ee.ExitCode() < 0:
			// Killed by a signal: its last line of standard error is not
			// why it stopped.
			line = fmt.Sprintf("%s was stopped: %s", args[0], ee.ProcessState)
		case line == "":
			line = fmt.Sprintf("%s exited with %s and wrote nothing on standard error", args[0], ee.ProcessState)
		}
		return nil, &reasons.CommandError{Line: line, ExitCode: ee.ExitCode()}
	}
	return nil, &reasons.CommandError{Line: fmt.Sprintf("could not run %s: %v", args[0], err), ExitCode: -1}
}

// tailBuffer keeps the last max bytes written to it.
type tailBuffer struct {
	max int
	b   []byte
}

func (t *tailBuffer) Write(p []byte) (int, error) {
	t.b = append(t.b, p...)
	if len(t.b) > t.max {
		t.b = t.b[len(t.b)-t.max:]
	}
	return len(p), nil
}

// lastLine is the last non-empty line written.
func (t *tailBuffer) lastLine() string {
	lines := strings.Split(strings.TrimRight(string(t.b), "\r\n\t "), "\n")
	return strings.TrimSpace(lines[len(lines)-1])
}

// lockedWriter serialises writes from concurrent commands.
type lockedWriter struct {
	mu sync.Mutex
	w  io.Writer
}

func (l *lockedWriter) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.w.Write(p)
}
