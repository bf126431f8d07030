// Command acemq is the operator's tool for AceMQ: it runs the demo, publishes
// and reads messages, asks and answers requests, replays dead letters,
// serves the operator console, measures a broker, encodes and decodes
// envelopes, writes development certificates, looks into a transactional
// outbox's table (outbox), and lists, declares and deletes queues,
// exchanges and bindings (queue, exchange, bind, unbind).
//
// The commands that connect to a broker (demo, publish, consume, ask, serve,
// replay, console, bench, queue, exchange, bind, unbind) take --url (default $ACEMQ_URL, else
// amqp://guest:guest@localhost:5672/; the demo defaults to memory://demo)
// and the TLS flags; every command takes --help. Exit codes:
//
//	0  success
//	1  usage or any other error
//	2  the responder failed (ask)
//	3  timed out (ask, consume)
//	4  unroutable (publish)
//
// See docs/cli/README.md in the repository for one page per command.
package main

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"os/signal"
	"strings"
	"syscall"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	exitOK         = 0
	exitFailure    = 1
	exitResponder  = 2
	exitTimeout    = 3
	exitUnroutable = 4
)

// defaultAMQPURL is used when neither --url nor $ACEMQ_URL is given.
const defaultAMQPURL = "amqp://guest:guest@localhost:5672/"

// exitError carries an exit code out of a command.
type exitError struct {
	code int
	err  error
}

func (e *exitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *exitError) Unwrap() error { return e.err }

// withCode wraps err so that the process exits with code.
func withCode(code int, err error) error { return &exitError{code: code, err: err} }

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root := newRootCmd()
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return exitOK
	}
	var ee *exitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, errorLine(ee.err))
		}
		return ee.code
	}
	fmt.Fprintln(stderr, errorLine(err))
	return exitFailure
}

// errorLine is err as the command prints it: its text as it is, after the
// command's name once. An error of package acemq begins with that name
// already; any other begins with its own package's name, or with none.
func errorLine(err error) string {
	if msg := err.Error(); strings.HasPrefix(msg, "acemq: ") {
		return msg
	}
	return "acemq: " + err.Error()
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "acemq",
		Short: "The AceMQ operator's tool",
		Long: `acemq runs the AceMQ demo, publishes and reads messages, asks and answers
requests, replays dead letters, serves the operator console, measures a
broker, encodes and decodes envelopes, writes development certificates, and
lists, declares and deletes queues, exchanges and bindings.

Exit codes: 0 success, 1 usage or other error, 2 the responder failed,
3 timed out, 4 unroutable.`,
		SilenceUsage:  true,
		SilenceErrors: true,
	}
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return withCode(exitFailure, fmt.Errorf("%v (see '%s --help')", err, c.CommandPath()))
	})
	root.AddCommand(
		newDemoCmd(),
		newEnvelopeCmd(),
		newPublishCmd(),
		newConsumeCmd(),
		newAskCmd(),
		newServeCmd(),
		newReplayCmd(),
		newConsoleCmd(),
		newBenchCmd(),
		newCertsCmd(),
		newOutboxCmd(),
		newPartitionCmd(),
		newQueueCmd(),
		newExchangeCmd(),
		newBindCmd(),
		newUnbindCmd(),
	)
	return root
}
