// Package exchange is the exchange command: list, declare and delete.
package exchange

import (
	"errors"
	"fmt"
	"io"
	"strings"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/cli"
	clitopology "github.com/acemq/acemq/internal/cli/topology"
	"github.com/acemq/acemq/topology"
	"github.com/spf13/cobra"
)

// NewCmd is the exchange command, with its subcommands list, declare and
// delete.
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
	cmd.AddCommand(clitopology.NewListCmd(list, nil), newDeclareCmd(nil), newDeleteCmd(nil))
	return cmd
}

// list is the exchange list subcommand.
var list = clitopology.Listing[clitopology.ExchangeJSON]{
	Short: "List the exchanges of the broker's virtual host",
	Long: `exchange list prints the named exchanges of --url's virtual host (the
nameless default exchange is left out): name, type and flags. The list comes
from RabbitMQ's management API, as for 'acemq queue list'; on memory:// it
is the in-process broker's.`,
	Example: `  acemq exchange list --url amqp://guest:guest@localhost:5672/
  acemq exchange list --json`,
	List: (*clitopology.Lister).Exchanges,
	Result: func(source string, xs []clitopology.ExchangeJSON) any {
		return clitopology.ExchangeListJSON{Source: source, Exchanges: xs}
	},
	Header: "NAME\tTYPE\tFLAGS",
	Row: func(x clitopology.ExchangeJSON) string {
		flags := clitopology.FlagColumn(clitopology.YesNo(!x.Durable, "transient"), clitopology.YesNo(x.AutoDelete, "auto-delete"), clitopology.YesNo(x.Internal, "internal"))
		return fmt.Sprintf("%s\t%s\t%s", x.Name, x.Type, flags)
	},
}

// declareOptions are exchange declare's flags.
type declareOptions struct {
	cli.Invocation
	clitopology.Flags
	kind                            string
	internal, autoDelete, transient bool
	args                            []string
	dryRun                          bool
	opts                            []topology.Option // what the flags ask for, by Validate
}

func newDeclareCmd(runF func(*declareOptions) error) *cobra.Command {
	f := &declareOptions{}
	cmd := &cobra.Command{
		Use:   "declare NAME --type direct|topic|fanout|headers|x-… [--internal] [--auto-delete] [--transient] [--arg K=V]... [--dry-run]",
		Short: "Declare an exchange",
		Long: `exchange declare declares an exchange through the library's Topology:
durable unless --transient. Names beginning amq. belong to the broker and
are refused. What exists with the same settings is left alone; what exists
with other settings fails, naming the difference.`,
		Example: `  acemq exchange declare orders --type topic
  acemq exchange declare audit --type fanout --dry-run --json`,
		Args: clitopology.OneName("exchange"),
		RunE: cli.RunE(f, runF),
	}
	clitopology.Command(cmd, &f.Flags)
	fl := cmd.Flags()
	fl.StringVar(&f.kind, "type", "", "exchange type: direct, topic, fanout, headers, or a plugin's x-… type (required)")
	fl.BoolVar(&f.internal, "internal", false, "publishers cannot publish to it; only other exchanges route to it")
	fl.BoolVar(&f.autoDelete, "auto-delete", false, "the broker deletes it when its last binding goes")
	fl.BoolVar(&f.transient, "transient", false, "not durable: the broker drops it on restart")
	fl.StringArrayVar(&f.args, "arg", nil, "an exchange argument K=V (repeatable), e.g. alternate-exchange=unrouted")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print what would be declared; connect to nothing")
	return cmd
}

// Validate checks --type and reads the declare options the flags ask for.
func (f *declareOptions) Validate() error {
	if f.kind == "" {
		return cli.WithCode(cli.ExitFailure, errors.New(`required flag(s) "type" not set: direct, topic, fanout, headers or a plugin's x-… type`))
	}
	if f.internal {
		f.opts = append(f.opts, topology.WithInternal())
	}
	if f.autoDelete {
		f.opts = append(f.opts, topology.WithAutoDelete())
	}
	if f.transient {
		f.opts = append(f.opts, topology.WithDurable(false))
	}
	m, err := clitopology.ParseArgs(f.args)
	if err != nil {
		return err
	}
	if m != nil {
		f.opts = append(f.opts, topology.WithArguments(m))
	}
	return nil
}

// Run declares the exchange (or, with --dry-run, prints it).
func (f *declareOptions) Run() error {
	return clitopology.Apply(f.Cmd, topology.New().Exchange(f.Args[0], topology.ExchangeKind(f.kind), f.opts...), f.dryRun, f.JSON)
}

// deleteOptions are exchange delete's flags.
type deleteOptions struct {
	cli.Invocation
	clitopology.Flags
}

func newDeleteCmd(runF func(*deleteOptions) error) *cobra.Command {
	f := &deleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete an exchange and its bindings",
		Long: `exchange delete deletes an exchange; its bindings go with it, and a
message published to it afterwards fails (missing exchange). The broker's
amq.* exchanges cannot be deleted, nor the library's shared acemq.dlx and
acemq.retry, which every queue's dead-letter half and retry rungs use.`,
		Example: `  acemq exchange delete orders.old
  acemq exchange delete audit --json`,
		Args: clitopology.OneName("exchange"),
		RunE: cli.RunE(f, runF),
	}
	return clitopology.Command(cmd, &f.Flags)
}

// Validate refuses the broker's exchanges and the library's shared ones.
func (f *deleteOptions) Validate() error {
	switch name := f.Args[0]; {
	case strings.HasPrefix(name, "amq."):
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("the exchange %q belongs to the broker and cannot be deleted", name))
	case name == contract.DeadLetterExchange || name == contract.RetryExchange:
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("the exchange %q is shared by every queue's dead-letter half and retry rungs; it is not deleted (delete the queues' halves with 'acemq queue delete --with-dead-letters')", name))
	}
	return nil
}

// Run deletes the exchange, which must exist.
func (f *deleteOptions) Run() error {
	cmd, name := f.Cmd, f.Args[0]
	s, ctx, cancel, err := clitopology.Open(cmd)
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
	if err := topology.New().Exchange(name, topology.ExchangeDirect).Delete(ctx, s.Conn); err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	out := clitopology.DeletedJSON{Deleted: []clitopology.DeletedItemJSON{{Kind: "exchange", Name: name}}}
	return clitopology.WriteResult(cmd, f.JSON, out, func(w io.Writer) { fmt.Fprintf(w, "deleted exchange %s\n", name) })
}
