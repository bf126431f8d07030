// Package topology holds what the topology commands (queue, exchange, bind,
// unbind) share: the --json flag, connecting, printing a result, declaring
// through topology.Topology, and listing through the management API.
package topology

import (
	"context"
	"errors"
	"fmt"
	"io"
	"os"
	"slices"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/management"
	"github.com/acemq/acemq/topology"
	"github.com/spf13/cobra"
)

// The topology commands: queue list|declare|delete|purge, exchange
// list|declare|delete, bind and unbind. Declarations go through
// topology.Topology, with the library's rules (queue types, the dead-letter
// half, retry rungs); deletions through Topology.Delete; listing through
// RabbitMQ's management API, or the memory broker's own listing.

// topologyTimeout bounds what a topology command asks of the broker once
// connected.
const topologyTimeout = 30 * time.Second

// Flags are the flags every topology command has.
type Flags struct {
	JSON bool
}

// Command is a topology subcommand with the broker flags and --json.
func Command(cmd *cobra.Command, f *Flags) *cobra.Command {
	cli.AddBrokerFlags(cmd, cli.SharedURLDefault)
	cli.AddWaitFlag(cmd)
	cmd.Flags().BoolVar(&f.JSON, "json", false, "print the result as one JSON object")
	return cmd
}

// OneName is the Args of a command that takes one NAME.
func OneName(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 || args[0] == "" {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("%s takes one %s name, for example: %s", cmd.CommandPath(), what, strings.TrimSpace(strings.SplitN(cmd.Example, "\n", 2)[0])))
		}
		return nil
	}
}

// Open connects for a topology command and bounds what follows.
func Open(cmd *cobra.Command) (*cli.Session, context.Context, context.CancelFunc, error) {
	s, err := cli.OpenSession(cmd, "")
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), topologyTimeout)
	return s, ctx, cancel, nil
}

// WriteResult prints v as one JSON line, or text.
func WriteResult(cmd *cobra.Command, asJSON bool, v any, text func(w io.Writer)) error {
	if asJSON {
		b, err := cli.MarshalLine(v)
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(b)
		return err
	}
	text(cmd.OutOrStdout())
	return nil
}

// ParseArgs reads --arg key=value flags: a value that reads as an integer
// is one (int64), true and false are booleans, anything else a string.
func ParseArgs(kvs []string) (map[string]any, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, cli.WithCode(cli.ExitFailure, fmt.Errorf("--arg %q: expected name=value, for example --arg x-message-ttl=60000", kv))
		}
		if n, err := strconv.ParseInt(v, 10, 64); err == nil {
			out[k] = n
		} else if b, err := strconv.ParseBool(v); err == nil && (v == "true" || v == "false") {
			out[k] = b
		} else {
			out[k] = v
		}
	}
	return out, nil
}

// declarationJSON is one declaration a command made (or, with --dry-run,
// would make).
type declarationJSON struct {
	Kind string `json:"kind"` // exchange, queue, binding
	Name string `json:"name"` // for a binding "exchange -> queue"
	Plan string `json:"plan"` // the plan line: what was declared, with its arguments
}

// declaredJSON is what queue declare, exchange declare and bind print with
// --json.
type declaredJSON struct {
	DryRun       bool              `json:"dryRun"`
	Declarations []declarationJSON `json:"declarations"`
}

// Apply validates topo, then declares it (unless dryRun) and
// prints its plan.
func Apply(cmd *cobra.Command, topo *topology.Topology, dryRun, asJSON bool) error {
	plan, err := topo.Plan()
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	if !dryRun {
		s, ctx, cancel, err := Open(cmd)
		if err != nil {
			return err
		}
		defer s.Close()
		defer cancel()
		if cli.IsMemory(s.URL) {
			fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", cli.MemoryNote(s.URL))
		}
		if err := topo.Apply(ctx, s.Conn); err != nil {
			return cli.WithCode(cli.ExitFailure, err)
		}
	}
	out := declaredJSON{DryRun: dryRun, Declarations: []declarationJSON{}}
	for _, d := range plan {
		out.Declarations = append(out.Declarations, declarationJSON{Kind: string(d.Kind), Name: d.Name(), Plan: d.String()})
	}
	return WriteResult(cmd, asJSON, out, func(w io.Writer) {
		verb := "declared"
		if dryRun {
			verb = "would declare"
		}
		for _, d := range plan {
			fmt.Fprintf(w, "%s %s\n", verb, d)
		}
	})
}

// The listing.

// QueueJSON is one queue of queue list --json.
type QueueJSON struct {
	Name       string `json:"name"`
	Type       string `json:"type"` // classic, quorum, stream
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"autoDelete"`
	Exclusive  bool   `json:"exclusive"`
	Messages   int    `json:"messages"` // ready for delivery
	// Unacked is the messages delivered and not yet settled; null when the
	// source cannot say (memory://).
	Unacked   *int `json:"unacked"`
	Consumers int  `json:"consumers"`
}

// QueueListJSON is what queue list --json prints.
type QueueListJSON struct {
	Source string      `json:"source"` // management or memory
	Queues []QueueJSON `json:"queues"`
}

// ExchangeJSON is one exchange of exchange list --json.
type ExchangeJSON struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"autoDelete"`
	Internal   bool   `json:"internal"`
}

// ExchangeListJSON is what exchange list --json prints.
type ExchangeListJSON struct {
	Source    string         `json:"source"`
	Exchanges []ExchangeJSON `json:"exchanges"`
}

// Lister lists what the broker holds: the memory broker through its
// driver, RabbitMQ through its management API.
type Lister struct {
	Source string // management or memory
	conn   *acemq.Conn
	api    *management.Client
}

// NewLister finds the command's source of names. mgmt is the --management
// flag: "" takes $ACEMQ_MANAGEMENT_URL, else derives the API's URL from
// --url (port 15672, --url's credentials).
func NewLister(s *cli.Session, mgmt string) (*Lister, error) {
	if cli.IsMemory(s.URL) {
		fmt.Fprintf(s.Cmd.ErrOrStderr(), "note: %s\n", cli.MemoryNote(s.URL))
		return &Lister{Source: "memory", conn: s.Conn}, nil
	}
	derived, vhost, ok := cli.ManagementURL(s.URL)
	if mgmt == "" {
		mgmt = os.Getenv("ACEMQ_MANAGEMENT_URL")
	}
	if mgmt == "" {
		if !ok {
			return nil, cli.WithCode(cli.ExitFailure, errors.New("cannot tell the management API's URL from --url; give --management http://user:pass@host:15672/"))
		}
		mgmt = derived
	}
	api, err := management.New(mgmt, vhost)
	if err != nil {
		return nil, cli.WithCode(cli.ExitFailure, fmt.Errorf("--management: %w", err))
	}
	return &Lister{Source: "management", api: api}, nil
}

// AddManagementFlag defines --management, the management API a listing
// reads, on cmd.
func AddManagementFlag(cmd *cobra.Command, mgmt *string) {
	cmd.Flags().StringVar(mgmt, "management", "", "RabbitMQ's management API, http://[user:pass@]host:15672/ (default: $ACEMQ_MANAGEMENT_URL, else http://HOST:15672/ with --url's credentials)")
}

// Listing is what a list subcommand (queue list, exchange list) lists:
// its help, how it lists, and how it prints.
type Listing[T any] struct {
	Short, Long, Example string
	List                 func(*Lister, context.Context) ([]T, error)
	Result               func(source string, items []T) any // the --json object
	Header               string                             // the table's header, tab-separated
	Row                  func(T) string                     // a row of the table, tab-separated
}

// ListOptions are a list subcommand's flags.
type ListOptions[T any] struct {
	cli.Invocation
	Flags
	Management string // --management
	listing    Listing[T]
}

// NewListCmd is the list subcommand l describes. When runF is not nil it
// runs instead of the command's own Run.
func NewListCmd[T any](l Listing[T], runF func(*ListOptions[T]) error) *cobra.Command {
	f := &ListOptions[T]{listing: l}
	cmd := &cobra.Command{
		Use:     "list [--management URL]",
		Short:   l.Short,
		Long:    l.Long,
		Example: l.Example,
		Args:    cobra.NoArgs,
		RunE:    cli.RunE(f, runF),
	}
	Command(cmd, &f.Flags)
	AddManagementFlag(cmd, &f.Management)
	return cmd
}

// Validate has nothing to check.
func (f *ListOptions[T]) Validate() error { return nil }

// Run connects, lists through the management API (or the memory broker's
// own listing), and prints the list as one JSON object or as a table.
func (f *ListOptions[T]) Run() error {
	s, ctx, cancel, err := Open(f.Cmd)
	if err != nil {
		return err
	}
	defer s.Close()
	defer cancel()
	l, err := NewLister(s, f.Management)
	if err != nil {
		return err
	}
	items, err := f.listing.List(l, ctx)
	if err != nil {
		return err
	}
	return WriteResult(f.Cmd, f.JSON, f.listing.Result(l.Source, items), func(w io.Writer) {
		tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
		fmt.Fprintln(tw, f.listing.Header)
		for _, it := range items {
			fmt.Fprintln(tw, f.listing.Row(it))
		}
		_ = tw.Flush()
	})
}

// FlagColumn is the FLAGS column of a listing: the names of the flags
// that are set, comma-separated, or "" when none is.
func FlagColumn(flags ...string) string {
	return strings.Join(slices.DeleteFunc(flags, func(s string) bool { return s == "-" }), ",")
}

// notAnswering explains a management API that failed.
func notAnswering(err error) error {
	return cli.WithCode(cli.ExitFailure, fmt.Errorf("%w (listing needs RabbitMQ's management API: rabbitmq-plugins enable rabbitmq_management, or give --management URL)", err))
}

// Queues lists the queues.
func (l *Lister) Queues(ctx context.Context) ([]QueueJSON, error) {
	out := []QueueJSON{}
	if l.api != nil {
		qs, err := l.api.Queues(ctx)
		if err != nil {
			return nil, notAnswering(err)
		}
		for _, q := range qs {
			unacked := q.Unacked
			out = append(out, QueueJSON{Name: q.Name, Type: q.Type, Durable: q.Durable, AutoDelete: q.AutoDelete, Exclusive: q.Exclusive, Messages: q.Ready, Unacked: &unacked, Consumers: q.Consumers})
		}
		return out, nil
	}
	err := l.conn.Raw(func(dc driver.Conn) error {
		ls, ok := dc.(driver.Lister)
		if !ok {
			return fmt.Errorf("the driver of %s cannot list queues: %w", l.conn, acemq.ErrUnsupported)
		}
		qs, err := ls.ListQueues(ctx)
		for _, q := range qs {
			typ, _ := q.Args["x-queue-type"].(string)
			if typ == "" {
				typ = string(topology.QueueClassic)
			}
			out = append(out, QueueJSON{Name: q.Name, Type: typ, Durable: q.Durable, AutoDelete: q.AutoDelete, Exclusive: q.Exclusive, Messages: q.Messages, Consumers: q.Consumers})
		}
		return err
	})
	if err != nil {
		return nil, cli.WithCode(cli.ExitFailure, err)
	}
	return out, nil
}

// Exchanges lists the named exchanges.
func (l *Lister) Exchanges(ctx context.Context) ([]ExchangeJSON, error) {
	out := []ExchangeJSON{}
	if l.api != nil {
		xs, err := l.api.Exchanges(ctx)
		if err != nil {
			return nil, notAnswering(err)
		}
		for _, x := range xs {
			if x.Name != "" {
				out = append(out, ExchangeJSON{Name: x.Name, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal})
			}
		}
		return out, nil
	}
	err := l.conn.Raw(func(dc driver.Conn) error {
		ls, ok := dc.(driver.Lister)
		if !ok {
			return fmt.Errorf("the driver of %s cannot list exchanges: %w", l.conn, acemq.ErrUnsupported)
		}
		xs, err := ls.ListExchanges(ctx)
		for _, x := range xs {
			out = append(out, ExchangeJSON{Name: x.Name, Type: x.Kind, Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal})
		}
		return err
	})
	if err != nil {
		return nil, cli.WithCode(cli.ExitFailure, err)
	}
	return out, nil
}

// YesNo is a flag column.
func YesNo(on bool, yes string) string {
	if on {
		return yes
	}
	return "-"
}

// DeletedJSON is what queue delete and exchange delete print with --json.
type DeletedJSON struct {
	Deleted []DeletedItemJSON `json:"deleted"`
}

// DeletedItemJSON is one queue or exchange deleted.
type DeletedItemJSON struct {
	Kind string `json:"kind"` // queue or exchange
	Name string `json:"name"`
	// Messages is how many messages a queue held when it was checked,
	// just before it was deleted (0 for an exchange).
	Messages int `json:"messages"`
}

// Plural is "s" unless n is 1.
func Plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// BindFlags are the flags bind and unbind share, and the arguments
// (--arg) parsed.
type BindFlags struct {
	Flags
	Exchange, Queue, Key string
	Arguments            []string       // --arg K=V
	Table                map[string]any // Arguments, parsed by Validate
	DryRun               bool
}

// Add defines the flags on cmd (--dry-run when withDryRun).
func (f *BindFlags) Add(cmd *cobra.Command, withDryRun bool) {
	Command(cmd, &f.Flags)
	fl := cmd.Flags()
	fl.StringVar(&f.Exchange, "exchange", "", "the exchange (required)")
	fl.StringVar(&f.Queue, "queue", "", "the queue (required)")
	fl.StringVar(&f.Key, "routing-key", "", "the binding's routing key: a pattern for a topic exchange (* one word, # any)")
	fl.StringArrayVar(&f.Arguments, "arg", nil, "a binding argument K=V (repeatable), e.g. x-match=all for a headers exchange")
	if withDryRun {
		fl.BoolVar(&f.DryRun, "dry-run", false, "print what would be declared; connect to nothing")
	}
}

// Validate checks that the exchange and the queue are given, and parses
// the arguments.
func (f *BindFlags) Validate() error {
	var missing []string
	if f.Exchange == "" {
		missing = append(missing, `"exchange"`)
	}
	if f.Queue == "" {
		missing = append(missing, `"queue"`)
	}
	if len(missing) > 0 {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("required flag(s) %s not set", strings.Join(missing, ", ")))
	}
	m, err := ParseArgs(f.Arguments)
	f.Table = m
	return err
}
