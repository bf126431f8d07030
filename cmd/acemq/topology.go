package main

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
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/management"
	"github.com/acemq/acemq/topology"
	"github.com/spf13/cobra"
)

// The topology commands: queue list|declare|delete|purge, exchange
// list|declare|delete, bind and unbind. Declarations go through
// acemq.Topology, with the library's rules (queue types, the dead-letter
// half, retry rungs); deletions through Topology.Delete; listing through
// RabbitMQ's management API, or the memory broker's own listing.

// topologyTimeout bounds what a topology command asks of the broker once
// connected.
const topologyTimeout = 30 * time.Second

// topoFlags are the flags every topology command has.
type topoFlags struct {
	json bool
}

// topoCmd is a topology subcommand with the broker flags and --json.
func topoCmd(cmd *cobra.Command, f *topoFlags) *cobra.Command {
	addBrokerFlags(cmd, sharedURLDefault)
	addWaitFlag(cmd)
	cmd.Flags().BoolVar(&f.json, "json", false, "print the result as one JSON object")
	return cmd
}

// oneName is the Args of a command that takes one NAME.
func oneName(what string) cobra.PositionalArgs {
	return func(cmd *cobra.Command, args []string) error {
		if len(args) != 1 || args[0] == "" {
			return withCode(exitFailure, fmt.Errorf("%s takes one %s name, for example: %s", cmd.CommandPath(), what, strings.TrimSpace(strings.SplitN(cmd.Example, "\n", 2)[0])))
		}
		return nil
	}
}

// openTopology connects for a topology command and bounds what follows.
func openTopology(cmd *cobra.Command) (*session, context.Context, context.CancelFunc, error) {
	s, err := openSession(cmd, "")
	if err != nil {
		return nil, nil, nil, err
	}
	ctx, cancel := context.WithTimeout(cmd.Context(), topologyTimeout)
	return s, ctx, cancel, nil
}

// writeResult prints v as one JSON line, or text.
func writeResult(cmd *cobra.Command, asJSON bool, v any, text func(w io.Writer)) error {
	if asJSON {
		b, err := marshalLine(v)
		if err != nil {
			return err
		}
		_, err = cmd.OutOrStdout().Write(b)
		return err
	}
	text(cmd.OutOrStdout())
	return nil
}

// parseArgs reads --arg key=value flags: a value that reads as an integer
// is one (int64), true and false are booleans, anything else a string.
func parseArgs(kvs []string) (map[string]any, error) {
	if len(kvs) == 0 {
		return nil, nil
	}
	out := make(map[string]any, len(kvs))
	for _, kv := range kvs {
		k, v, ok := strings.Cut(kv, "=")
		if !ok || k == "" {
			return nil, withCode(exitFailure, fmt.Errorf("--arg %q: expected name=value, for example --arg x-message-ttl=60000", kv))
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

// applyTopology validates topo, then declares it (unless dryRun) and
// prints its plan.
func applyTopology(cmd *cobra.Command, topo *acemq.Topology, dryRun, asJSON bool) error {
	plan, err := topo.Plan()
	if err != nil {
		return withCode(exitFailure, err)
	}
	if !dryRun {
		s, ctx, cancel, err := openTopology(cmd)
		if err != nil {
			return err
		}
		defer s.close()
		defer cancel()
		if isMemory(s.url) {
			fmt.Fprintf(cmd.ErrOrStderr(), "note: %s\n", memoryNote(s.url))
		}
		if err := topo.Apply(ctx, s.conn); err != nil {
			return withCode(exitFailure, err)
		}
	}
	out := declaredJSON{DryRun: dryRun, Declarations: []declarationJSON{}}
	for _, d := range plan {
		out.Declarations = append(out.Declarations, declarationJSON{Kind: string(d.Kind), Name: d.Name(), Plan: d.String()})
	}
	return writeResult(cmd, asJSON, out, func(w io.Writer) {
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

// queueJSON is one queue of queue list --json.
type queueJSON struct {
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

// queueListJSON is what queue list --json prints.
type queueListJSON struct {
	Source string      `json:"source"` // management or memory
	Queues []queueJSON `json:"queues"`
}

// exchangeJSON is one exchange of exchange list --json.
type exchangeJSON struct {
	Name       string `json:"name"`
	Type       string `json:"type"`
	Durable    bool   `json:"durable"`
	AutoDelete bool   `json:"autoDelete"`
	Internal   bool   `json:"internal"`
}

// exchangeListJSON is what exchange list --json prints.
type exchangeListJSON struct {
	Source    string         `json:"source"`
	Exchanges []exchangeJSON `json:"exchanges"`
}

// lister lists what the broker holds: the memory broker through its
// driver, RabbitMQ through its management API.
type lister struct {
	source string // management or memory
	conn   *acemq.Conn
	api    *management.Client
}

// newLister finds the command's source of names. mgmt is the --management
// flag: "" takes $ACEMQ_MANAGEMENT_URL, else derives the API's URL from
// --url (port 15672, --url's credentials).
func newLister(s *session, mgmt string) (*lister, error) {
	if isMemory(s.url) {
		fmt.Fprintf(s.cmd.ErrOrStderr(), "note: %s\n", memoryNote(s.url))
		return &lister{source: "memory", conn: s.conn}, nil
	}
	derived, vhost, ok := managementURL(s.url)
	if mgmt == "" {
		mgmt = os.Getenv("ACEMQ_MANAGEMENT_URL")
	}
	if mgmt == "" {
		if !ok {
			return nil, withCode(exitFailure, errors.New("cannot tell the management API's URL from --url; give --management http://user:pass@host:15672/"))
		}
		mgmt = derived
	}
	api, err := management.New(mgmt, vhost)
	if err != nil {
		return nil, withCode(exitFailure, fmt.Errorf("--management: %w", err))
	}
	return &lister{source: "management", api: api}, nil
}

// notAnswering explains a management API that failed.
func notAnswering(err error) error {
	return withCode(exitFailure, fmt.Errorf("%w (listing needs RabbitMQ's management API: rabbitmq-plugins enable rabbitmq_management, or give --management URL)", err))
}

func (l *lister) queues(ctx context.Context) ([]queueJSON, error) {
	out := []queueJSON{}
	if l.api != nil {
		qs, err := l.api.Queues(ctx)
		if err != nil {
			return nil, notAnswering(err)
		}
		for _, q := range qs {
			unacked := q.Unacked
			out = append(out, queueJSON{Name: q.Name, Type: q.Type, Durable: q.Durable, AutoDelete: q.AutoDelete, Exclusive: q.Exclusive, Messages: q.Ready, Unacked: &unacked, Consumers: q.Consumers})
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
				typ = string(acemq.QueueClassic)
			}
			out = append(out, queueJSON{Name: q.Name, Type: typ, Durable: q.Durable, AutoDelete: q.AutoDelete, Exclusive: q.Exclusive, Messages: q.Messages, Consumers: q.Consumers})
		}
		return err
	})
	if err != nil {
		return nil, withCode(exitFailure, err)
	}
	return out, nil
}

func (l *lister) exchanges(ctx context.Context) ([]exchangeJSON, error) {
	out := []exchangeJSON{}
	if l.api != nil {
		xs, err := l.api.Exchanges(ctx)
		if err != nil {
			return nil, notAnswering(err)
		}
		for _, x := range xs {
			if x.Name != "" {
				out = append(out, exchangeJSON{Name: x.Name, Type: x.Type, Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal})
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
			out = append(out, exchangeJSON{Name: x.Name, Type: x.Kind, Durable: x.Durable, AutoDelete: x.AutoDelete, Internal: x.Internal})
		}
		return err
	})
	if err != nil {
		return nil, withCode(exitFailure, err)
	}
	return out, nil
}

// yesNo is a flag column.
func yesNo(on bool, yes string) string {
	if on {
		return yes
	}
	return "-"
}

// queue

func newQueueCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "queue list|declare|delete|purge",
		Short: "List, declare, delete and purge queues",
		Long: `queue lists the broker's queues, declares one with the library's rules (a
durable queue is a quorum queue; --dead-lettering adds Q.dlq and Q.parked;
--retry adds the policy's retry rungs), deletes one (refusing a queue that
holds messages or has consumers, unless --force), or purges one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withCode(exitFailure, fmt.Errorf("%s needs a subcommand: list, declare, delete or purge (see '%s --help')", cmd.CommandPath(), cmd.CommandPath()))
		},
	}
	cmd.AddCommand(newQueueListCmd(), newQueueDeclareCmd(), newQueueDeleteCmd(), newQueuePurgeCmd())
	return cmd
}

func newQueueListCmd() *cobra.Command {
	var f topoFlags
	var mgmt string
	cmd := &cobra.Command{
		Use:   "list [--management URL]",
		Short: "List the queues of the broker's virtual host",
		Long: `queue list prints the queues of --url's virtual host: name, type, messages
ready, unacknowledged, consumers. RabbitMQ cannot list over AMQP: the list
comes from its management API (by default http://HOST:15672/ with --url's
credentials; --management to give another). Its counts are sampled every
few seconds. On memory:// the list is the in-process broker's.`,
		Example: `  acemq queue list --url amqp://guest:guest@localhost:5672/
  acemq queue list --json --management http://ops:secret@rabbit:15672/`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			s, ctx, cancel, err := openTopology(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			defer cancel()
			l, err := newLister(s, mgmt)
			if err != nil {
				return err
			}
			qs, err := l.queues(ctx)
			if err != nil {
				return err
			}
			return writeResult(cmd, f.json, queueListJSON{Source: l.source, Queues: qs}, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tTYPE\tMESSAGES\tUNACKED\tCONSUMERS\tFLAGS")
				for _, q := range qs {
					unacked := "-"
					if q.Unacked != nil {
						unacked = strconv.Itoa(*q.Unacked)
					}
					flags := strings.Join(slices.DeleteFunc([]string{yesNo(!q.Durable, "transient"), yesNo(q.Exclusive, "exclusive"), yesNo(q.AutoDelete, "auto-delete")}, func(s string) bool { return s == "-" }), ",")
					fmt.Fprintf(tw, "%s\t%s\t%d\t%s\t%d\t%s\n", q.Name, q.Type, q.Messages, unacked, q.Consumers, flags)
				}
				_ = tw.Flush()
			})
		},
	}
	topoCmd(cmd, &f)
	cmd.Flags().StringVar(&mgmt, "management", "", "RabbitMQ's management API, http://[user:pass@]host:15672/ (default: $ACEMQ_MANAGEMENT_URL, else http://HOST:15672/ with --url's credentials)")
	return cmd
}

type queueDeclareFlags struct {
	topoFlags
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
}

func newQueueDeclareCmd() *cobra.Command {
	var f queueDeclareFlags
	cmd := &cobra.Command{
		Use:   "declare NAME [--type quorum|classic|stream] [--dead-lettering] [--retry POLICY] [--max-priority N] [--arg K=V]... [--dry-run]",
		Short: "Declare a queue with the library's rules",
		Long: `queue declare declares a queue through the library's Topology, as an
application would: durable, so a quorum queue unless --type says otherwise;
with --dead-lettering its dead-letter half (the acemq.dlx exchange, Q.dlq,
Q.parked and their bindings); with --retry POLICY the policy's retry rungs
(Q.retry.DELAY, for waits of 30s and more), the acemq.retry exchange and the
return binding. What exists with the same settings is left alone; what
exists with other settings fails, naming the difference. --dry-run prints
what would be declared and connects to nothing.

POLICY is the family's notation: none(), fixed(N, DELAY) or
exponential(N, FIRST, CAP), then any of .giveUpAfter(AGE), .withJitter(F),
.waitInBrokerFrom(DELAY); N counts every attempt, the first included.`,
		Example: `  acemq queue declare orders.new --dead-lettering --retry 'exponential(5, 1s, 1m)'
  acemq queue declare payments --dead-lettering --retry 'fixed(3, 5m)' --dry-run
  acemq queue declare jobs --type classic --max-priority 10 --arg x-message-ttl=60000
  acemq queue declare events --type stream --max-age 168h --json`,
		Args: oneName("queue"),
		RunE: func(cmd *cobra.Command, args []string) error {
			opts, err := f.options(cmd)
			if err != nil {
				return err
			}
			return applyTopology(cmd, acemq.NewTopology().Queue(args[0], opts...), f.dryRun, f.json)
		},
	}
	topoCmd(cmd, &f.topoFlags)
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

// options are the declare options the flags ask for; the Topology judges
// them.
func (f *queueDeclareFlags) options(cmd *cobra.Command) ([]acemq.DeclareOption, error) {
	var opts []acemq.DeclareOption
	fl := cmd.Flags()
	if f.typ != "" {
		switch t := acemq.QueueType(f.typ); t {
		case acemq.QueueQuorum, acemq.QueueClassic, acemq.QueueStream:
			opts = append(opts, acemq.WithQueueType(t))
		default:
			return nil, withCode(exitFailure, fmt.Errorf("--type %q: want quorum, classic or stream", f.typ))
		}
	}
	if f.deadLetter {
		opts = append(opts, acemq.WithDeadLettering(true))
	}
	if f.retry != "" {
		p, err := parseRetryPolicy(f.retry)
		if err != nil {
			return nil, withCode(exitFailure, err)
		}
		opts = append(opts, acemq.WithRetry(p))
	}
	if fl.Changed("max-priority") {
		if f.maxPriority < 1 || f.maxPriority > 255 {
			return nil, withCode(exitFailure, fmt.Errorf("--max-priority %d: want 1 to 255", f.maxPriority))
		}
		opts = append(opts, acemq.WithMaxPriority(uint8(f.maxPriority)))
	}
	if fl.Changed("group-size") {
		opts = append(opts, acemq.WithInitialGroupSize(f.groupSize))
	}
	if f.singleActive {
		opts = append(opts, acemq.WithSingleActiveConsumer())
	}
	if fl.Changed("max-age") {
		opts = append(opts, acemq.WithMaxAge(f.maxAge))
	}
	if fl.Changed("max-length-bytes") {
		opts = append(opts, acemq.WithMaxLengthBytes(f.maxBytes))
	}
	if f.transient {
		opts = append(opts, acemq.WithDurable(false))
	}
	args, err := parseArgs(f.args)
	if err != nil {
		return nil, err
	}
	if args != nil {
		opts = append(opts, acemq.WithArguments(args))
	}
	return opts, nil
}

// deletedJSON is what queue delete and exchange delete print with --json.
type deletedJSON struct {
	Deleted []deletedItemJSON `json:"deleted"`
}

// deletedItemJSON is one queue or exchange deleted.
type deletedItemJSON struct {
	Kind string `json:"kind"` // queue or exchange
	Name string `json:"name"`
	// Messages is how many messages a queue held when it was checked,
	// just before it was deleted (0 for an exchange).
	Messages int `json:"messages"`
}

type queueDeleteFlags struct {
	topoFlags
	force       bool
	deadLetters bool
	retry       string
	mgmt        string
}

func newQueueDeleteCmd() *cobra.Command {
	var f queueDeleteFlags
	cmd := &cobra.Command{
		Use:   "delete NAME [--force] [--with-dead-letters [--retry POLICY]]",
		Short: "Delete a queue (an empty one unless --force)",
		Long: `queue delete deletes a queue. It refuses, deleting nothing, when the queue
holds messages ready for delivery or has consumers, unless --force (then its
messages are deleted with it). The check is made just before deleting: a
message that arrives in between is deleted with the queue.

--with-dead-letters deletes Q.dlq, Q.parked and Q's retry rungs
(Q.retry.DELAY) too, each under the same rule: a dead-letter queue holding
messages is refused without --force. The rungs are those --retry POLICY
declares, or, without --retry, every queue named Q.retry.DELAY that the
listing shows (the management API; memory://'s own list). The shared
exchanges acemq.dlx and acemq.retry stay: other queues use them.`,
		Example: `  acemq queue delete orders.tmp
  acemq queue delete orders.new --with-dead-letters --retry 'fixed(3, 5m)' --force
  acemq queue delete scratch --force --json`,
		Args: oneName("queue"),
		RunE: func(cmd *cobra.Command, args []string) error {
			return runQueueDelete(cmd, args[0], f)
		},
	}
	topoCmd(cmd, &f.topoFlags)
	fl := cmd.Flags()
	fl.BoolVar(&f.force, "force", false, "delete even a queue that holds messages or has consumers")
	fl.BoolVar(&f.deadLetters, "with-dead-letters", false, "delete Q.dlq, Q.parked and Q's retry rungs too")
	fl.StringVar(&f.retry, "retry", "", "with --with-dead-letters: the retry policy Q was declared with, naming its rungs")
	fl.StringVar(&f.mgmt, "management", "", "with --with-dead-letters and no --retry: the management API to find the rungs with (default: $ACEMQ_MANAGEMENT_URL, else http://HOST:15672/ with --url's credentials)")
	return cmd
}

func runQueueDelete(cmd *cobra.Command, q string, f queueDeleteFlags) error {
	if f.retry != "" && !f.deadLetters {
		return withCode(exitFailure, errors.New("--retry names the rungs --with-dead-letters deletes; give both"))
	}
	names := []string{q}
	if f.deadLetters {
		opts := []acemq.DeclareOption{acemq.WithDeadLettering(true)}
		if f.retry != "" {
			p, err := parseRetryPolicy(f.retry)
			if err != nil {
				return withCode(exitFailure, err)
			}
			opts = append(opts, acemq.WithRetry(p))
		}
		// The halves are named by the rules that declare them.
		plan, err := acemq.NewTopology().Queue(q, opts...).Plan()
		if err != nil {
			return withCode(exitFailure, err)
		}
		for _, d := range plan {
			if d.Kind == topology.QueueDeclaration && d.Queue.Name != q {
				names = append(names, d.Queue.Name)
			}
		}
	}
	s, ctx, cancel, err := openTopology(cmd)
	if err != nil {
		return err
	}
	defer s.close()
	defer cancel()
	if f.deadLetters && f.retry == "" {
		rungs, err := findRungs(ctx, s, q, f.mgmt)
		if err != nil {
			return err
		}
		names = append(names, rungs...)
	}
	var found []deletedItemJSON
	var busy []string
	for i, n := range names {
		info, err := s.conn.Inspect(ctx, n)
		if errors.Is(err, acemq.ErrNotFound) {
			if i == 0 {
				return withCode(exitFailure, fmt.Errorf("queue %q does not exist%s", q, s.hint()))
			}
			continue
		}
		if err != nil {
			return withCode(exitFailure, err)
		}
		found = append(found, deletedItemJSON{Kind: "queue", Name: n, Messages: info.Messages})
		if info.Messages > 0 || info.Consumers > 0 {
			var what []string
			if info.Messages > 0 {
				what = append(what, fmt.Sprintf("holds %d message%s", info.Messages, plural(info.Messages)))
			}
			if info.Consumers > 0 {
				what = append(what, fmt.Sprintf("has %d consumer%s", info.Consumers, plural(info.Consumers)))
			}
			busy = append(busy, n+" "+strings.Join(what, " and "))
		}
	}
	if len(busy) > 0 && !f.force {
		return withCode(exitFailure, fmt.Errorf("%s: nothing was deleted (add --force to delete them with their messages)", strings.Join(busy, "; ")))
	}
	topo := acemq.NewTopology()
	for _, d := range found {
		// Only the name counts for deleting; the type is the one a
		// topology needs to be valid.
		topo.Queue(d.Name, acemq.WithQueueType(acemq.QueueClassic))
	}
	if err := topo.Delete(ctx, s.conn); err != nil {
		return withCode(exitFailure, err)
	}
	return writeResult(cmd, f.json, deletedJSON{Deleted: found}, func(w io.Writer) {
		for _, d := range found {
			fmt.Fprintf(w, "deleted queue %s (%d message%s)\n", d.Name, d.Messages, plural(d.Messages))
		}
	})
}

// findRungs lists the queues named q.retry.DELAY.
func findRungs(ctx context.Context, s *session, q, mgmt string) ([]string, error) {
	l, err := newLister(s, mgmt)
	if err != nil {
		return nil, err
	}
	qs, err := l.queues(ctx)
	if err != nil {
		return nil, withCode(exitFailure, fmt.Errorf("finding the retry rungs of %s: %w (or name them with --retry POLICY)", q, err))
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

// plural is "s" unless n is 1.
func plural(n int) string {
	if n == 1 {
		return ""
	}
	return "s"
}

// purgedJSON is what queue purge prints with --json.
type purgedJSON struct {
	Queue  string `json:"queue"`
	Purged int    `json:"purged"`
}

func newQueuePurgeCmd() *cobra.Command {
	var f topoFlags
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
		Args: oneName("queue"),
		RunE: func(cmd *cobra.Command, args []string) error {
			q := args[0]
			s, ctx, cancel, err := openTopology(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			defer cancel()
			var n int
			err = s.conn.Raw(func(dc driver.Conn) error {
				p, ok := dc.(driver.Purger)
				if !ok {
					return fmt.Errorf("the driver of %s cannot purge: %w", s.conn, acemq.ErrUnsupported)
				}
				n, err = p.PurgeQueue(ctx, q)
				return err
			})
			if errors.Is(err, acemq.ErrNotFound) {
				return withCode(exitFailure, fmt.Errorf("queue %q does not exist%s", q, s.hint()))
			}
			if err != nil {
				return withCode(exitFailure, fmt.Errorf("purging %s: %w", q, err))
			}
			return writeResult(cmd, f.json, purgedJSON{Queue: q, Purged: n}, func(w io.Writer) {
				fmt.Fprintf(w, "purged %d message%s from %s\n", n, plural(n), q)
			})
		},
	}
	return topoCmd(cmd, &f)
}

// exchange

func newExchangeCmd() *cobra.Command {
	cmd := &cobra.Command{
		Use:   "exchange list|declare|delete",
		Short: "List, declare and delete exchanges",
		Long: `exchange lists the broker's exchanges, declares one through the library's
Topology (durable unless --transient), or deletes one.`,
		Args: cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			return withCode(exitFailure, fmt.Errorf("%s needs a subcommand: list, declare or delete (see '%s --help')", cmd.CommandPath(), cmd.CommandPath()))
		},
	}
	cmd.AddCommand(newExchangeListCmd(), newExchangeDeclareCmd(), newExchangeDeleteCmd())
	return cmd
}

func newExchangeListCmd() *cobra.Command {
	var f topoFlags
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
			s, ctx, cancel, err := openTopology(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			defer cancel()
			l, err := newLister(s, mgmt)
			if err != nil {
				return err
			}
			xs, err := l.exchanges(ctx)
			if err != nil {
				return err
			}
			return writeResult(cmd, f.json, exchangeListJSON{Source: l.source, Exchanges: xs}, func(w io.Writer) {
				tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
				fmt.Fprintln(tw, "NAME\tTYPE\tFLAGS")
				for _, x := range xs {
					flags := strings.Join(slices.DeleteFunc([]string{yesNo(!x.Durable, "transient"), yesNo(x.AutoDelete, "auto-delete"), yesNo(x.Internal, "internal")}, func(s string) bool { return s == "-" }), ",")
					fmt.Fprintf(tw, "%s\t%s\t%s\n", x.Name, x.Type, flags)
				}
				_ = tw.Flush()
			})
		},
	}
	topoCmd(cmd, &f)
	cmd.Flags().StringVar(&mgmt, "management", "", "RabbitMQ's management API, http://[user:pass@]host:15672/ (default: $ACEMQ_MANAGEMENT_URL, else http://HOST:15672/ with --url's credentials)")
	return cmd
}

func newExchangeDeclareCmd() *cobra.Command {
	var f topoFlags
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
		Args: oneName("exchange"),
		RunE: func(cmd *cobra.Command, a []string) error {
			if kind == "" {
				return withCode(exitFailure, errors.New(`required flag(s) "type" not set: direct, topic, fanout, headers or a plugin's x-… type`))
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
			m, err := parseArgs(args)
			if err != nil {
				return err
			}
			if m != nil {
				opts = append(opts, acemq.WithArguments(m))
			}
			return applyTopology(cmd, acemq.NewTopology().Exchange(a[0], acemq.ExchangeKind(kind), opts...), dryRun, f.json)
		},
	}
	topoCmd(cmd, &f)
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
	var f topoFlags
	cmd := &cobra.Command{
		Use:   "delete NAME",
		Short: "Delete an exchange and its bindings",
		Long: `exchange delete deletes an exchange; its bindings go with it, and a
message published to it afterwards fails (missing exchange). The broker's
amq.* exchanges cannot be deleted, nor the library's shared acemq.dlx and
acemq.retry, which every queue's dead-letter half and retry rungs use.`,
		Example: `  acemq exchange delete orders.old
  acemq exchange delete audit --json`,
		Args: oneName("exchange"),
		RunE: func(cmd *cobra.Command, args []string) error {
			name := args[0]
			switch {
			case strings.HasPrefix(name, "amq."):
				return withCode(exitFailure, fmt.Errorf("the exchange %q belongs to the broker and cannot be deleted", name))
			case name == contract.DeadLetterExchange || name == contract.RetryExchange:
				return withCode(exitFailure, fmt.Errorf("the exchange %q is shared by every queue's dead-letter half and retry rungs; it is not deleted (delete the queues' halves with 'acemq queue delete --with-dead-letters')", name))
			}
			s, ctx, cancel, err := openTopology(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			defer cancel()
			err = s.conn.Raw(func(dc driver.Conn) error {
				ins, ok := dc.(driver.Inspector)
				if !ok {
					return nil // deleting a missing exchange succeeds anyway
				}
				return ins.InspectExchange(ctx, name)
			})
			if errors.Is(err, acemq.ErrNotFound) {
				return withCode(exitFailure, fmt.Errorf("exchange %q does not exist%s", name, s.hint()))
			}
			if err != nil {
				return withCode(exitFailure, err)
			}
			// Only the name counts for deleting; the kind is one a
			// topology needs to be valid.
			if err := acemq.NewTopology().Exchange(name, acemq.ExchangeDirect).Delete(ctx, s.conn); err != nil {
				return withCode(exitFailure, err)
			}
			out := deletedJSON{Deleted: []deletedItemJSON{{Kind: "exchange", Name: name}}}
			return writeResult(cmd, f.json, out, func(w io.Writer) { fmt.Fprintf(w, "deleted exchange %s\n", name) })
		},
	}
	return topoCmd(cmd, &f)
}

// bind and unbind

type bindFlags struct {
	topoFlags
	exchange, queue, key string
	args                 []string
	dryRun               bool
}

func (f *bindFlags) add(cmd *cobra.Command, withDryRun bool) {
	topoCmd(cmd, &f.topoFlags)
	fl := cmd.Flags()
	fl.StringVar(&f.exchange, "exchange", "", "the exchange (required)")
	fl.StringVar(&f.queue, "queue", "", "the queue (required)")
	fl.StringVar(&f.key, "routing-key", "", "the binding's routing key: a pattern for a topic exchange (* one word, # any)")
	fl.StringArrayVar(&f.args, "arg", nil, "a binding argument K=V (repeatable), e.g. x-match=all for a headers exchange")
	if withDryRun {
		fl.BoolVar(&f.dryRun, "dry-run", false, "print what would be declared; connect to nothing")
	}
}

func (f *bindFlags) check() error {
	var missing []string
	if f.exchange == "" {
		missing = append(missing, `"exchange"`)
	}
	if f.queue == "" {
		missing = append(missing, `"queue"`)
	}
	if len(missing) > 0 {
		return withCode(exitFailure, fmt.Errorf("required flag(s) %s not set", strings.Join(missing, ", ")))
	}
	return nil
}

func newBindCmd() *cobra.Command {
	var f bindFlags
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
			if err := f.check(); err != nil {
				return err
			}
			m, err := parseArgs(f.args)
			if err != nil {
				return err
			}
			var opts []acemq.DeclareOption
			if m != nil {
				opts = append(opts, acemq.WithArguments(m))
			}
			return applyTopology(cmd, acemq.NewTopology().Bind(f.exchange, f.queue, f.key, opts...), f.dryRun, f.json)
		},
	}
	f.add(cmd, true)
	return cmd
}

// unboundJSON is what unbind prints with --json.
type unboundJSON struct {
	Exchange   string `json:"exchange"`
	Queue      string `json:"queue"`
	RoutingKey string `json:"routingKey"`
}

func newUnbindCmd() *cobra.Command {
	var f bindFlags
	cmd := &cobra.Command{
		Use:   "unbind --exchange E --queue Q [--routing-key K] [--arg K=V]...",
		Short: "Remove a binding of a queue to an exchange",
		Long: `unbind removes the binding of the queue to the exchange with the routing key
and arguments given (the ones it was bound with). Removing a binding that
does not exist succeeds, as RabbitMQ has it; a missing queue or exchange
fails.`,
		Example: `  acemq unbind --exchange orders --queue orders.new --routing-key 'order.*'`,
		Args:    cobra.NoArgs,
		RunE: func(cmd *cobra.Command, args []string) error {
			if err := f.check(); err != nil {
				return err
			}
			m, err := parseArgs(f.args)
			if err != nil {
				return err
			}
			s, ctx, cancel, err := openTopology(cmd)
			if err != nil {
				return err
			}
			defer s.close()
			defer cancel()
			b := driver.Binding{Exchange: f.exchange, Queue: f.queue, RoutingKey: f.key}
			if m != nil {
				b.Args = m
			}
			err = s.conn.Raw(func(dc driver.Conn) error {
				u, ok := dc.(driver.Unbinder)
				if !ok {
					return fmt.Errorf("the driver of %s cannot remove bindings: %w", s.conn, acemq.ErrUnsupported)
				}
				return u.Unbind(ctx, b)
			})
			if err != nil {
				return withCode(exitFailure, fmt.Errorf("unbinding %s from %s: %w%s", f.queue, f.exchange, err, s.hint()))
			}
			return writeResult(cmd, f.json, unboundJSON{Exchange: f.exchange, Queue: f.queue, RoutingKey: f.key}, func(w io.Writer) {
				fmt.Fprintf(w, "unbound %s -> %s on %q\n", f.exchange, f.queue, f.key)
			})
		},
	}
	f.add(cmd, false)
	return cmd
}
