// Package exchange is the exchange command: list, declare and delete.
package exchange

import (
	"errors"
	"fmt"
	"io"
	"slices"
	"strings"
	"text/tabwriter"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/cli/topology"
	"github.com/spf13/cobra"
)

func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exchange list|declare|delete",
		Short: "List, declare and delete exchanges",
		Long: `exchange lists the broker's exchanges, declares one through the library's
Topology (durable unless --transient), or deletes one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("%s needs a subcommand: list, declare or delete (see '%s --help')", cmd.CommandPath(), cmd.CommandPath()))
		},
	}
	cmd.AddCommand(newExchangeListCmd(), newExchangeDeclareCmd(), newExchangeDeleteCmd())
	return cmd
}

func newExchangeListCmd() *cobra.Command {
	var f topology.Flags
	var mgmt string
	cmd := &cobra.Command{
		Use:   "list [--management URL]",
		Short: "List the exchanges of the broker's virtual host",
		Long: `exchange list prints the named exchanges of --url's virtual host (the
nameless default exchange is left out): name, type and flags. The list comes
from RabbitMQ's management API, as for 'acemq queue list'; on memory:// it
is the in-process broker's.`,
		Example: `  acemq exchange list --url amqp://guest:guest@localhost:5672/
  acemq exchange list --json`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, ctx, cancel, err := topology.Open(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			defer cancel()
			l, err := topology.NewLister(s, mgmt)
			if err != nil {
				return err
			}
			xs, err := l.Exchanges(ctx)
			if err != nil {
				return err
			}
			return topology.WriteResult(cmd, f.JSON, topology.ExchangeListJSON{Source: l.Source, Exchanges: xs}, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tTYPE\tFLAGS")
				for _, x := range xs {
					flags := strings.Join(slices.DeleteFunc([]string{topology.YesNo(!x.Durable, "transient"), topology.YesNo(x.AutoDelete, "auto-delete"), topology.YesNo(x.Internal, "internal")}, func(s string) bool { return s == "-" }), ",")
					fmt.Fprintf(tw, "%s\t%s\t%s\n", x.Name, x.Type, flags)
				}
				_ = tw.Flush()
			})
		},
	}
	topology.Command(cmd, &f)
	cmd.Flags().StringVar(&mgmt, "management", "", "RabbitMQ's management API, http://[user:pass@]host:15672/ (default: $ACEMQ_MANAGEMENT_URL, else http://HOST:15672/ with --url's credentials)")
	return cmd
}

func newExchangeDeclareCmd() *cobra.Command {
	var f topology.Flags
	var (
		kind                            string
		internal, autoDelete, transient bool
		args                            []string
		dryRun                          bool
	)
	cmd := &cobra.Command{
		Use:   "declare NAME --type direct|topic|fanout|headers|x-… [--internal] [--auto-delete] [--transient] [--arg K=V]... [--dry-run]",
		Short: "Declare an exchange",
		Long: `exchange declare declares an exchange through the library's Topology:
durable unless --transient. Names beginning amq. belong to the broker and
are refused. What exists with the same settings is left alone; what exists
with other settings fails, naming the difference.`,
		Example: `  acemq exchange declare orders --type topic
  acemq exchange declare audit --type fanout --dry-run --json`,
		Args: topology.OneName("exchange"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if kind == "" {
				return cli.WithCode(cli.ExitFailure, errors.New(`required flag(s) "type" not set: direct, topic, fanout, headers or a plugin's x-… type`))
			}
			var opts []acemq.DeclareOption
			if internal {
				opts = append(opts, acemq.WithInternal())
			}
			if autoDelete {
				opts = append(opts, acemq.WithAutoDelete())
			}
			if transient {
				opts = append(opts, acemq.WithDurable(false))
			}
			m, err := topology.ParseArgs(args)
			if err != nil {
				return err
			}
			if m != nil {
				opts = append(opts, acemq.WithArguments(m))
			}
			return topology.Apply(cmd, acemq.NewTopology().Exchange(a[0], kind, opts...), dryRun, f.JSON)
		},
	}
	topology.Command(cmd, &f)
	fl := cmd.Flags()
	fl.StringVar(&kind, "type", "", "exchange type: direct, topic, fanout, headers, or a plugin's x-… type (required)")
	fl.BoolVar(&internal, "internal", false, "publishers cannot publish to it; only other exchanges route to it")
	fl.BoolVar(&autoDelete, "auto-delete", false, "the broker deletes it when its last binding goes")
	fl.BoolVar(&transient, "transient", false, "not durable: the broker drops it on restart")
	fl.StringArrayVar(&args, "arg", nil, "an exchange argument K=V (repeatable), e.g. alternate-exchange=unrouted")
	fl.BoolVar(&dryRun, "dry-run", false, "print what would be declared; connect to nothing")
	return cmd
}

func newExchangeDeleteCmd() *cobra.Command {
	var f topology.Flags
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete an exchange and its bindings",
		Long: `exchange delete deletes an exchange; its bindings go with it, and a
message published to it afterwards fails (missing exchange). The broker's
amq.* exchanges cannot be deleted, nor the library's shared acemq.dlx and
acemq.retry, which every queue's dead-letter half and retry rungs use.`,
		Example: `  acemq exchange delete orders.old
  acemq exchange delete audit --json`,
		Args: topology.OneName("exchange"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			switch {
			case strings.HasPrefix(name, "amq."):
				return cli.WithCode(cli.ExitFailure, fmt.Errorf("the exchange %q belongs to the broker and cannot be deleted", name))
			case name == acemq.DeadLetterExchange || name == acemq.RetryExchange:
				return cli.WithCode(cli.ExitFailure, fmt.Errorf("the exchange %q is shared by every queue's dead-letter half and retry rungs; it is not deleted (delete the queues' halves with 'acemq queue delete --with-dead-letters')", name))
			}
			s, ctx, cancel, err := topology.Open(cmd)
			if err != nil {
				return err
			}
			defer s.Close()
			defer cancel()
			err = s.Conn.Raw(func(dc driver.Conn) error {
				ins, ok := dc.(driver.Inspector)
				if !ok {
					return nil // deleting a missing exchange succeeds anyway
				}
				return ins.InspectExchange(ctx, name)
			})
			if errors.Is(err, acemq.ErrNotFound) {
				return cli.WithCode(cli.ExitFailure, fmt.Errorf("exchange %q does not exist%s", name, s.Hint()))
			}
			if err != nil {
				return cli.WithCode(cli.ExitFailure, err)
			}
			// Only the name counts for deleting; the kind is one a
			// topology needs to be valid.
			if err := acemq.NewTopology().Exchange(name, acemq.ExchangeDirect).Delete(ctx, s.Conn); err != nil {
				return cli.WithCode(cli.ExitFailure, err)
			}
			out := topology.DeletedJSON{Deleted: []topology.DeletedItemJSON{{Kind: "exchange", Name: name}}}
			return topology.WriteResult(cmd, f.JSON, out, func(w io.Writer) { fmt.Fprintf(w, "deleted exchange %s\n", name) })
		},
	}
	return topology.Command(cmd, &f)
}
