// Package cli holds what the acemq commands share; each command is a
// package of its own below it (internal/cli/publish, internal/cli/queue,
// …), whose NewCmd builds the cobra command and whose Options, once cobra
// has read the flags into them, Complete, Validate and Run (RunE ties the
// three together, as kubectl's commands do).
//
// Shared here: the exit codes and ExitError, Execute (which runs a root
// command and maps its error to an exit code), the broker and TLS flags and
// the Session they open, the keyring flag and opening encrypted bodies, the
// raw codec, JSON lines, and the metrics flag. cmd/acemq puts the commands
// together; cmd/acemq-bench is the benchmark harness, apart so that acemq
// links no package testing.
package cli

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/spf13/cobra"
)

// Exit codes.
const (
	ExitOK         = 0
	ExitFailure    = 1
	ExitResponder  = 2
	ExitTimeout    = 3
	ExitUnroutable = 4
)

// DefaultAMQPURL is used when neither --url nor $ACEMQ_URL is given.
const DefaultAMQPURL = "amqp://guest:guest@localhost:5672/"

// ExitError carries an exit code out of a command.
type ExitError struct {
	code int
	err  error
}

// Error is the error's message, or the exit status when there is none.
func (e *ExitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

// Unwrap is the error carried.
func (e *ExitError) Unwrap() error { return e.err }

// Code is the process's exit code.
func (e *ExitError) Code() int { return e.code }

// WithCode wraps err so that the process exits with code.
func WithCode(code int, err error) error { return &ExitError{code: code, err: err} }

// Execute runs root with the command line args and returns the process's
// exit code: the code an ExitError carries, ExitFailure for any other
// error. The error is printed on stderr as errorLine has it.
// Usage printing and error printing are Execute's: root's are silenced, and
// a flag error exits with ExitFailure, naming the command's --help.
func Execute(ctx context.Context, root *cobra.Command, args []string, stdin io.Reader, stdout, stderr io.Writer) int {
	root.SilenceUsage, root.SilenceErrors = true, true
	root.SetFlagErrorFunc(func(c *cobra.Command, err error) error {
		return WithCode(ExitFailure, fmt.Errorf("%v (see '%s --help')", err, c.CommandPath()))
	})
	root.SetArgs(args)
	root.SetIn(stdin)
	root.SetOut(stdout)
	root.SetErr(stderr)
	err := root.ExecuteContext(ctx)
	if err == nil {
		return ExitOK
	}
	var ee *ExitError
	if errors.As(err, &ee) {
		if ee.err != nil {
			fmt.Fprintln(stderr, errorLine(ee.err))
		}
		return ee.code
	}
	fmt.Fprintln(stderr, errorLine(err))
	return ExitFailure
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
