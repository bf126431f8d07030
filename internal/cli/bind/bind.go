// Package bind is the bind command.
package bind

import (
	"github.com/acemq/acemq/internal/cli"
	clitopology "github.com/acemq/acemq/internal/cli/topology"
	"github.com/acemq/acemq/topology"
	"github.com/spf13/cobra"
)

// Options are bind's flags, read by NewCmd's command; BindFlags validates
// them.
type Options struct {
	cli.Invocation
	clitopology.BindFlags
}

// NewCmd is the bind command. When runF is not nil it runs instead of the
// command's own Run, once the flags are read and valid.
func NewCmd(runF func(*Options) error) *cobra.Command {
	f := &Options{}
	cmd := &cobra.Command{
		Use:   "bind --exchange E --queue Q [--routing-key K] [--arg K=V]... [--dry-run]",
		Short: "Bind a queue to an exchange",
		Long: `bind binds a queue to an exchange with a routing key, through the library's
Topology. Both must exist. Binding twice with the same key and arguments
is one binding. 'acemq unbind' removes it.`,
		Example: `  acemq bind --exchange orders --queue orders.new --routing-key 'order.*'
  acemq bind --exchange audit --queue audit.all --json`,
		Args: cobra.NoArgs,
		RunE: cli.RunE(f, runF),
	}
	f.Add(cmd, true)
	return cmd
}

// Run declares the binding (or, with --dry-run, prints it).
func (f *Options) Run() error {
	var opts []topology.Option
	if f.Table != nil {
		opts = append(opts, topology.WithArguments(f.Table))
	}
	return clitopology.Apply(f.Cmd, topology.New().Bind(f.Exchange, f.Queue, f.Key, opts...), f.DryRun, f.JSON)
}
