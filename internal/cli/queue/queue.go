// Package queue is the queue command: list, declare, delete and purge.
package queue

import (
	"context"
	"errors"
	"fmt"
	"io"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/cli"
	clitopology "github.com/acemq/acemq/internal/cli/topology"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/topology"
	"github.com/spf13/cobra"
)

// NewCmd is the queue command, with its subcommands list, declare,
// delete and purge.
func NewCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue list|declare|delete|purge",
		Short: "List, declare, delete and purge queues",
		Long: `queue lists the broker's queues, declares one with the library's rules (a
durable queue is a quorum queue; --dead-lettering adds Q.dlq and Q.parked;
--retry adds the policy's retry rungs), deletes one (refusing a queue that
holds messages or has consumers, unless --force), or purges one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return cli.WithCode(cli.ExitFailure, fmt.Errorf("%s needs a subcommand: list, declare, delete or purge (see '%s --help')", cmd.CommandPath(), cmd.CommandPath()))
		},
	}
	cmd.AddCommand(clitopology.NewListCmd(list, nil), newDeclareCmd(nil), newDeleteCmd(nil), newPurgeCmd(nil))
	return cmd
}

// list is the queue list subcommand.
var list = clitopology.Listing[clitopology.QueueJSON]{
	Short: "List the queues of the broker's virtual host",
	Long: `queue list prints the queues of --url's virtual host: name, type, messages
ready, unacknowledged, consumers. RabbitMQ cannot list over AMQP: the list
comes from its management API (by default http://HOST:15672/ with --url's
credentials; --management to give another). Its counts are sampled every
few seconds. On memory:// the list is the in-process broker's.`,
	Example: `  acemq queue list --url amqp://guest:guest@localhost:5672/
  acemq queue list --json --management http://ops:secret@rabbit:15672/`,
	List: (*clitopology.Lister).Queues,
	Result: func(source string, qs []clitopology.QueueJSON) any {
		return clitopology.QueueListJSON{Source: source, Queues: qs}
	},
	Header: "NAME\tTYPE\tMESSAGES\tUNACKED\tCONSUMERS\tFLAGS",
	Row: func(q clitopology.QueueJSON) string {
		unacked := "-"
		if q.Unacked != nil {
			unacked = strconv.Itoa(*q.Unacked)
		}
		flags := clitopology.FlagColumn(clitopology.YesNo(!q.Durable, "transient"), clitopology.YesNo(q.Exclusive, "exclusive"), clitopology.YesNo(q.AutoDelete, "auto-delete"))
		return fmt.Sprintf("%s\t%s\t%d\t%s\t%d\t%s", q.Name, q.Type, q.Messages, unacked, q.Consumers, flags)
	},
}

// declareOptions are queue declare's flags.
type declareOptions struct {
	cli.Invocation
	clitopology.Flags
	typ          string
	deadLetter   bool
	retry        string
	maxPriority  int
	groupSize    int
	singleActive bool
	maxAge       time.Duration
	maxBytes     int64
	transient    bool
	args         []string
	dryRun       bool
	opts         []topology.Option // what the flags ask for, by Validate
}

func newDeclareCmd(runF func(*declareOptions) error) *cobra.Command {
	f := &declareOptions{}
	cmd := &cobra.Command{
		Use:   "declare NAME [--type quorum|classic|stream] [--dead-lettering] [--retry POLICY] [--max-priority N] [--arg K=V]... [--dry-run]",
		Short: "Declare a queue with the library's rules",
		Long:  declareLong,
		Example: `  acemq queue declare orders.new --dead-lettering --retry 'exponential(5, 1s, 1m)'
  acemq queue declare payments --dead-lettering --retry 'fixed(3, 5m)' --dry-run
  acemq queue declare jobs --type classic --max-priority 10 --arg x-message-ttl=60000
  acemq queue declare events --type stream --max-age 168h --json`,
		Args: clitopology.OneName("queue"),
		RunE: cli.RunE(f, runF),
	}
	clitopology.Command(cmd, &f.Flags)
	fl := cmd.Flags()
	fl.StringVar(&f.typ, "type", "", "queue type: quorum, classic or stream (default: quorum; classic when --transient)")
	fl.BoolVar(&f.deadLetter, "dead-lettering", false, "declare the dead-letter half too: Q.dlq, Q.parked and their bindings on acemq.dlx")
	fl.StringVar(&f.retry, "retry", "", "declare POLICY's retry rungs too, e.g. 'exponential(5, 1s, 1m)' or 'fixed(3, 5m)'")
	fl.IntVar(&f.maxPriority, "max-priority", 0, "a priority queue with priorities 0 to N (1-255; classic queues)")
	fl.IntVar(&f.groupSize, "group-size", 0, "a quorum queue's initial number of members (x-quorum-initial-group-size)")
	fl.BoolVar(&f.singleActive, "single-active-consumer", false, "one consumer receives at a time, the others stand by")
	fl.DurationVar(&f.maxAge, "max-age", 0, "a stream's retention by age (x-max-age)")
	fl.Int64Var(&f.maxBytes, "max-length-bytes", 0, "a stream's retention by size (x-max-length-bytes)")
	fl.BoolVar(&f.transient, "transient", false, "not durable (a classic queue the broker drops on restart)")
	fl.StringArrayVar(&f.args, "arg", nil, "a queue argument K=V (repeatable); integers and true/false are sent as such")
	fl.BoolVar(&f.dryRun, "dry-run", false, "print what would be declared; connect to nothing")
	return cmd
}

// declareLong is the help of queue declare.
const declareLong = `queue declare declares a queue through the library's Topology, as an
application would: durable, so a quorum queue unless --type says otherwise;
with --dead-lettering its dead-letter half (the acemq.dlx exchange, Q.dlq,
Q.parked and their bindings); with --retry POLICY the policy's retry rungs
(Q.retry.DELAY, for waits of 30s and more), the acemq.retry exchange and the
return binding. What exists with the same settings is left alone; what
exists with other settings fails, naming the difference. --dry-run prints
what would be declared and connects to nothing.

POLICY is the family's notation: none(), fixed(N, DELAY) or
exponential(N, FIRST, CAP), then any of .giveUpAfter(AGE), .withJitter(F),
.waitInBrokerFrom(DELAY); N counts every attempt, the first included.`

// Validate reads the declare options the flags ask for.
func (f *declareOptions) Validate() error {
	opts, err := f.options(f.Cmd)
	f.opts = opts
	return err
}

// Run declares the queue (or, with --dry-run, prints what it would
// declare).
func (f *declareOptions) Run() error {
	return clitopology.Apply(f.Cmd, topology.New().Queue(f.Args[0], f.opts...), f.dryRun, f.JSON)
}

// options are the declare options the flags ask for; the Topology judges
// them.
func (f *declareOptions) options(cmd *cobra.Command) ([]topology.Option, error) {
	var opts []topology.Option
	fl := cmd.Flags()
	if f.typ != "" {
		switch t := topology.QueueType(f.typ); t {
		case topology.QueueQuorum, topology.QueueClassic, topology.QueueStream:
			opts = append(opts, topology.WithQueueType(t))
		default:
			return nil, cli.WithCode(cli.ExitFailure, fmt.Errorf("--type %q: want quorum, classic or stream", f.typ))
		}
	}
	if f.deadLetter {
		opts = append(opts, topology.WithDeadLettering(true))
	}
	if f.retry != "" {
		p, err := parseRetryPolicy(f.retry)
		if err != nil {
			return nil, cli.WithCode(cli.ExitFailure, err)
		}
		opts = append(opts, acemq.WithRetry(p))
	}
	if fl.Changed("max-priority") {
		if f.maxPriority < 1 || f.maxPriority > 255 {
			return nil, cli.WithCode(cli.ExitFailure, fmt.Errorf("--max-priority %d: want 1 to 255", f.maxPriority))
		}
		opts = append(opts, topology.WithMaxPriority(uint8(f.maxPriority)))
	}
	if fl.Changed("group-size") {
		opts = append(opts, topology.WithInitialGroupSize(f.groupSize))
	}
	if f.singleActive {
		opts = append(opts, topology.WithSingleActiveConsumer())
	}
	if fl.Changed("max-age") {
		opts = append(opts, topology.WithMaxAge(f.maxAge))
	}
	if fl.Changed("max-length-bytes") {
		opts = append(opts, topology.WithMaxLengthBytes(f.maxBytes))
	}
	if f.transient {
		opts = append(opts, topology.WithDurable(false))
	}
	args, err := clitopology.ParseArgs(f.args)
	if err != nil {
		return nil, err
	}
	if args != nil {
		opts = append(opts, topology.WithArguments(args))
	}
	return opts, nil
}

// deleteOptions are queue delete's flags.
type deleteOptions struct {
	cli.Invocation
	clitopology.Flags
	force       bool
	deadLetters bool
	retry       string
	mgmt        string
	names       []string // the queue, then its dead-letter half and rungs (by Validate)
}

func newDeleteCmd(runF func(*deleteOptions) error) *cobra.Command {
	f := &deleteOptions{}
	cmd := &cobra.Command{
		Use:   "delete NAME [--force] [--with-dead-letters [--retry POLICY]]",
		Short: "Delete a queue (an empty one unless --force)",
		Long:  deleteLong,
		Example: `  acemq queue delete orders.tmp
  acemq queue delete orders.new --with-dead-letters --retry 'fixed(3, 5m)' --force
  acemq queue delete scratch --force --json`,
		Args: clitopology.OneName("queue"),
		RunE: cli.RunE(f, runF),
	}
	clitopology.Command(cmd, &f.Flags)
	fl := cmd.Flags()
	fl.BoolVar(&f.force, "force", false, "delete even a queue that holds messages or has consumers")
	fl.BoolVar(&f.deadLetters, "with-dead-letters", false, "delete Q.dlq, Q.parked and Q's retry rungs too")
	fl.StringVar(&f.retry, "retry", "", "with --with-dead-letters: the retry policy Q was declared with, naming its rungs")
	fl.StringVar(&f.mgmt, "management", "", "with --with-dead-letters and no --retry: the management API to find the rungs with (default: $ACEMQ_MANAGEMENT_URL, else http://HOST:15672/ with --url's credentials)")
	return cmd
}

// deleteLong is the help of queue delete.
const deleteLong = `queue delete deletes a queue. It refuses, deleting nothing, when the queue
holds messages ready for delivery or has consumers, unless --force (then its
messages are deleted with it). The check is made just before deleting: a
message that arrives in between is deleted with the queue.

--with-dead-letters deletes Q.dlq, Q.parked and Q's retry rungs
(Q.retry.DELAY) too, each under the same rule: a dead-letter queue holding
messages is refused without --force. The rungs are those --retry POLICY
declares, or, without --retry, every queue named Q.retry.DELAY that the
listing shows (the management API; memory://'s own list). The shared
exchanges acemq.dlx and acemq.retry stay: other queues use them.`

// Validate checks --retry and names the queues to delete: the queue, and
// with --with-dead-letters its halves, by the rules that declare them.
func (f *deleteOptions) Validate() error {
	q := f.Args[0]
	if f.retry != "" && !f.deadLetters {
		return cli.WithCode(cli.ExitFailure, errors.New("--retry names the rungs --with-dead-letters deletes; give both"))
	}
	f.names = []string{q}
	if !f.deadLetters {
		return nil
	}
	opts := []topology.Option{topology.WithDeadLettering(true)}
	if f.retry != "" {
		p, err := parseRetryPolicy(f.retry)
		if err != nil {
			return cli.WithCode(cli.ExitFailure, err)
		}
		opts = append(opts, acemq.WithRetry(p))
	}
	// The halves are named by the rules that declare them.
	plan, err := topology.New().Queue(q, opts...).Plan()
	if err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	for _, d := range plan {
		if d.Kind == topology.QueueDeclaration && d.Queue.Name != q {
			f.names = append(f.names, d.Queue.Name)
		}
	}
	return nil
}

// Run checks each queue just before deleting them all, refusing (unless
// --force) when one holds messages or has consumers.
func (f *deleteOptions) Run() error {
	cmd, q := f.Cmd, f.Args[0]
	s, ctx, cancel, err := clitopology.Open(cmd)
	if err != nil {
		return err
	}
	defer s.Close()
	defer cancel()
	names := f.names
	if f.deadLetters && f.retry == "" {
		rungs, err := findRungs(ctx, s, q, f.mgmt)
		if err != nil {
			return err
		}
		names = append(names, rungs...)
	}
	found, err := f.check(ctx, s, names)
	if err != nil {
		return err
	}
	topo := topology.New()
	for _, d := range found {
		// Only the name counts for deleting; the type is the one a
		// topology needs to be valid.
		topo.Queue(d.Name, topology.WithQueueType(topology.QueueClassic))
	}
	if err := topo.Delete(ctx, s.Conn); err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	return clitopology.WriteResult(cmd, f.JSON, clitopology.DeletedJSON{Deleted: found}, func(w io.Writer) {
		for _, d := range found {
			fmt.Fprintf(w, "deleted queue %s (%d message%s)\n", d.Name, d.Messages, clitopology.Plural(d.Messages))
		}
	})
}

// check inspects the queues named: the first must exist, the others are
// skipped when they do not; one that holds messages or has consumers fails
// the command unless --force.
func (f *deleteOptions) check(ctx context.Context, s *cli.Session, names []string) ([]clitopology.DeletedItemJSON, error) {
	var found []clitopology.DeletedItemJSON
	var busy []string
	for i, n := range names {
		info, err := queues.Inspect(ctx, s.Conn, n)
		if errors.Is(err, acemq.ErrNotFound) {
			if i == 0 {
				return nil, cli.WithCode(cli.ExitFailure, fmt.Errorf("queue %q does not exist%s", n, s.Hint()))
			}
			continue
		}
		if err != nil {
			return nil, cli.WithCode(cli.ExitFailure, err)
		}
		found = append(found, clitopology.DeletedItemJSON{Kind: "queue", Name: n, Messages: info.Messages})
		if info.Messages > 0 || info.Consumers > 0 {
			var what []string
			if info.Messages > 0 {
				what = append(what, fmt.Sprintf("holds %d message%s", info.Messages, clitopology.Plural(info.Messages)))
			}
			if info.Consumers > 0 {
				what = append(what, fmt.Sprintf("has %d consumer%s", info.Consumers, clitopology.Plural(info.Consumers)))
			}
			busy = append(busy, n+" "+strings.Join(what, " and "))
		}
	}
	if len(busy) > 0 && !f.force {
		return nil, cli.WithCode(cli.ExitFailure, fmt.Errorf("%s: nothing was deleted (add --force to delete them with their messages)", strings.Join(busy, "; ")))
	}
	return found, nil
}

// findRungs lists the queues named q.retry.DELAY.
func findRungs(ctx context.Context, s *cli.Session, q, mgmt string) ([]string, error) {
	l, err := clitopology.NewLister(s, mgmt)
	if err != nil {
		return nil, err
	}
	qs, err := l.Queues(ctx)
	if err != nil {
		return nil, cli.WithCode(cli.ExitFailure, fmt.Errorf("finding the retry rungs of %s: %w (or name them with --retry POLICY)", q, err))
	}
	var rungs []string
	for _, have := range qs {
		delay, ok := strings.CutPrefix(have.Name, q+".retry.")
		if !ok {
			continue
		}
		if d, err := time.ParseDuration(delay); err == nil && contract.RungQueue(q, d) == have.Name {
			rungs = append(rungs, have.Name)
		}
	}
	return rungs, nil
}

// purgedJSON is what queue purge prints with --json.
type purgedJSON struct {
	Queue  string `json:"queue"`
	Purged int    `json:"purged"`
}

// purgeOptions are queue purge's flags.
type purgeOptions struct {
	cli.Invocation
	clitopology.Flags
}

func newPurgeCmd(runF func(*purgeOptions) error) *cobra.Command {
	f := &purgeOptions{}
	cmd := &cobra.Command{
		Use:   "purge NAME",
		Short: "Delete every message ready on a queue",
		Long: `queue purge deletes the messages ready on a queue (queue.purge) and prints
how many. It does not ask: like every acemq command it is meant for scripts
too. Messages delivered to a consumer and not yet settled are not purged; if
they are put back they are on the queue again. A stream cannot be purged. A
purged message is gone: it is not dead-lettered. To look first, use
'acemq consume --requeue'; to keep dead letters, 'acemq replay'.`,
		Example: `  acemq queue purge orders.new.dlq
  acemq queue purge scratch --json`,
		Args: clitopology.OneName("queue"),
		RunE: cli.RunE(f, runF),
	}
	return clitopology.Command(cmd, &f.Flags)
}

// Validate has nothing to check.
func (f *purgeOptions) Validate() error { return nil }

// Run purges the queue.
func (f *purgeOptions) Run() error {
	cmd, q := f.Cmd, f.Args[0]
	s, ctx, cancel, err := clitopology.Open(cmd)
	if err != nil {
		return err
	}
	defer s.Close()
	defer cancel()
	var n int
	err = s.Conn.Raw(func(dc driver.Conn) error {
		p, ok := dc.(driver.Purger)
		if !ok {
			return fmt.Errorf("the driver of %s cannot purge: %w", s.Conn, acemq.ErrUnsupported)
		}
		n, err = p.PurgeQueue(ctx, q)
		return err
	})
	if errors.Is(err, acemq.ErrNotFound) {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("queue %q does not exist%s", q, s.Hint()))
	}
	if err != nil {
		return cli.WithCode(cli.ExitFailure, fmt.Errorf("purging %s: %w", q, err))
	}
	return clitopology.WriteResult(cmd, f.JSON, purgedJSON{Queue: q, Purged: n}, func(w io.Writer) {
		fmt.Fprintf(w, "purged %d message%s from %s\n", n, clitopology.Plural(n), q)
	})
}
