// Package bind is the bind command.
package bind

import (
	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/cli/topology"
	"github.com/spf13/cobra"
)

func NewCmd() *cobra.Command {
	var f topology.BindFlags
	cmd := &cobra.Command{
		Use:   "bind --exchange E --queue Q [--routing-key K] [--arg K=V]... [--dry-run]",
		Short: "Bind a queue to an exchange",
		Long: `bind binds a queue to an exchange with a routing key, through the library's
Topology. Both must exist. Binding twice with the same key and arguments
is one binding. 'acemq unbind' removes it.`,
		Example: `  acemq bind --exchange orders --queue orders.new --routing-key 'order.*'
  acemq bind --exchange audit --queue audit.all --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.Check(); err != nil {
				return err
			}
			m, err := topology.ParseArgs(f.Args)
			if err != nil {
				return err
			}
			var opts []acemq.DeclareOption
			if m != nil {
				opts = append(opts, acemq.WithArguments(m))
			}
			return topology.Apply(cmd, acemq.NewTopology().Bind(f.Exchange, f.Queue, f.Key, opts...), f.DryRun, f.JSON)
		},
	}
	f.Add(cmd, true)
	return cmd
}
