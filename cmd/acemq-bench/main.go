// Command acemq-bench measures a broker through the AceMQ library, as
// RabbitMQ's PerfTest does: publish, consume and request/reply throughput
// and latency percentiles, and with --compare-raw the same work through
// plain amqp091-go. It is a command of its own, not a subcommand of acemq,
// because its harness (internal/perf) links package testing, which the
// operator's binary does not carry.
//
// It takes the broker and TLS flags acemq's commands take (--url, default
// $ACEMQ_URL, else amqp://guest:guest@localhost:5672/). Exit codes: 0
// success, 1 usage or any other error, including a message lost or failed.
// See docs/cli/bench.md in the repository.
package main

import (
	"context"
	"io"
	"os"
	"os/signal"
	"syscall"

	"github.com/acemq/acemq/internal/cli"
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
