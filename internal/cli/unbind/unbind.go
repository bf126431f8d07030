// Package unbind is the unbind command.
package unbind

import (
	"fmt"
	"io"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/cli/topology"
	"github.com/spf13/cobra"
)

// unboundJSON is what unbind prints with --json.
type unboundJSON struct {
	Exchange   string `json:"exchange"`
	Queue      string `json:"queue"`
	RoutingKey string `json:"routingKey"`
}

// Options are unbind's flags, read by NewCmd's command; BindFlags
// validates them.
type Options struct {
	cli.Invocation
	topology.BindFlags
}

// NewCmd is the unbind command. When runF is not nil it runs instead of
// the command's own Run, once the flags are read and valid.
func NewCmd(runF func(*Options) error) *cobra.Command {
	f := &Options{}
	cmd := &cobra.Command{
		Use:   "unbind --exchange E --queue Q [--routing-key K] [--arg K=V]...",
		Short: "Remove a binding of a queue to an exchange",
		Long: `unbind removes the binding of the queue to the exchange with the routing key
and arguments given (the ones it was bound with). Removing a binding that
does not exist succeeds, as RabbitMQ has it; a missing queue or exchange
fails.`,
		Example: `  acemq unbind --exchange orders --queue orders.new --routing-key 'order.*'`,
		Args:    cobra.NoArgs,
		RunE:    cli.RunE(f, runF),
	}
	f.Add(cmd, false)
	return cmd
}

// Run removes the binding.
func (f *Options) Run() error {
	cmd := f.Cmd
	s, ctx, cancel, err := topology.Open(cmd)
	if err != nil {
		return err
	}
	defer s.Close()
	defer cancel()
	b := driver.Binding{Exchange: f.Exchange, Queue: f.Queue, RoutingKey: f.Key}
	if f.Table != nil {
		b.Args = f.Table
	}
	err = s.Conn.Raw(func(dc driver.Conn) error {
		u, ok := dc.(driver.Unbinder)
		if !ok {
			return fmt.Errorf("the driver of %s cannot remove bindings: %w", s.Conn, acemq.ErrUnsupported)
		}
		return u.Unbind(ctx, b)
	})
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("unbinding %s from %s: %w%s", f.Queue, f.Exchange, err, s.Hint()))
	}
	return topology.WriteResult(cmd, f.JSON, unboundJSON{Exchange: f.Exchange, Queue: f.Queue, RoutingKey: f.Key}, func(w io.Writer) {
		fmt.Fprintf(w, "unbound %s -> %s on %q\n", f.Exchange, f.Queue, f.Key)
	})
}
