// Command acemq is the operator's tool for AceMQ: it runs the demo, publishes
// and reads messages, asks and answers requests, replays dead letters,
// serves the operator console, encodes and decodes envelopes, writes development certificates, looks into a transactional
// outbox's table (outbox), and lists, declares and deletes queues,
// exchanges and bindings (queue, exchange, bind, unbind).
//
// The commands that connect to a broker (demo, publish, consume, ask, serve,
// replay, console, queue, exchange, bind, unbind) take --url (default $ACEMQ_URL, else
// amqp://guest:guest@localhost:5672/; the demo defaults to memory://demo)
// and the TLS flags; every command takes --help. Exit codes:
//
//	0  success
//	1  usage or any other error
//	2  the responder failed (ask)
//	3  timed out (ask, consume)
//	4  unroutable (publish)
//
// See docs/cli/README.md in the repository for one page per command. The
// benchmark harness is a command of its own, acemq-bench (cmd/acemq-bench),
// so that this binary links no package testing.
//
// The code: each command is a package of its own under internal/cli (one
// cobra command, built by NewCmd, and its Options, which validate and run),
// the pieces they share (the broker and TLS flags, the session, the keyring,
// JSON lines, exit codes) are package internal/cli, and this package only
// puts the commands together.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/cli/ask"
	"github.com/acemq/acemq/internal/cli/bind"
	"github.com/acemq/acemq/internal/cli/certs"
	"github.com/acemq/acemq/internal/cli/console"
	"github.com/acemq/acemq/internal/cli/consume"
	"github.com/acemq/acemq/internal/cli/demo"
	"github.com/acemq/acemq/internal/cli/envelope"
	"github.com/acemq/acemq/internal/cli/exchange"
	"github.com/acemq/acemq/internal/cli/outbox"
	"github.com/acemq/acemq/internal/cli/partition"
	"github.com/acemq/acemq/internal/cli/publish"
	"github.com/acemq/acemq/internal/cli/queue"
	"github.com/acemq/acemq/internal/cli/replay"
	"github.com/acemq/acemq/internal/cli/serve"
	"github.com/acemq/acemq/internal/cli/unbind"
	"github.com/spf13/cobra"
)

func main() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	code := run(ctx, os.Args[1:], os.Stdin, os.Stdout, os.Stderr)
	stop()
	os.Exit(code)
}

// run executes the command line args and returns the exit code.
func run(ctx context.Context, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	return cli.Execute(ctx, newRootCmd(), args, stdin, stdout, stderr)
}

func newRootCmd() *cobra.Command {
	root := &cobra.Command{
		Use:   "acemq",
		Short: "The AceMQ operator's tool",
		Long: `acemq runs the AceMQ demo, publishes and reads messages, asks and answers
requests, replays dead letters, serves the operator console, encodes and
decodes envelopes, writes development certificates, and lists, declares and
deletes queues, exchanges and bindings. The benchmark harness is a command
of its own, acemq-bench.

Exit codes: 0 success, 1 usage or other error, 2 the responder failed,
3 timed out, 4 unroutable.`,
	}
	root.AddCommand(
		demo.NewCmd(nil),
		envelope.NewCmd(nil),
		publish.NewCmd(nil),
		consume.NewCmd(nil),
		ask.NewCmd(nil),
		serve.NewCmd(nil),
		replay.NewCmd(nil),
		console.NewCmd(nil),
		certs.NewCmd(nil),
		outbox.NewCmd(nil),
		partition.NewCmd(nil),
		queue.NewCmd(),
		exchange.NewCmd(),
		bind.NewCmd(nil),
		unbind.NewCmd(nil),
	)
	return root
}
