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

func (e *ExitError) Error() string {
	if e.err == nil {
		return fmt.Sprintf("exit status %d", e.code)
	}
	return e.err.Error()
}

func (e *ExitError) Unwrap() error { return e.err }

// Code is the process's exit code.
func (e *ExitError) Code() int { return e.code }

// WithCode wraps err so that the process exits with code.
func WithCode(code int, err error) error { return &ExitError{code: code, err: err} }

// Execute runs root with the command line args and returns the process's
// exit code: the code an ExitError carries, ExitFailure for any other
// error. The error is printed on stderr after the root command's name.
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
			fmt.Fprintf(stderr, "%s: %s\n", root.Name(), strings.TrimPrefix(ee.err.Error(), "acemq: "))
		}
		return ee.code
	}
	fmt.Fprintf(stderr, "%s: %s\n", root.Name(), strings.TrimPrefix(err.Error(), "acemq: "))
	return ExitFailure
}
