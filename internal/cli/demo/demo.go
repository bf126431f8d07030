// Package demo is the demo command: a small order system in one process,
// narrated message by message, on memory://demo or a RabbitMQ.
package demo

import (
	"context"
	"errors"
	"fmt"
	"io"
	"sort"
	"strings"
	"sync"
	"text/tabwriter"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/console"
	"github.com/acemq/acemq/contract"
	"github.com/acemq/acemq/internal/cli"
	consolecmd "github.com/acemq/acemq/internal/cli/console"
	"github.com/acemq/acemq/internal/cli/reasons"
	"github.com/acemq/acemq/internal/wire"
	"github.com/acemq/acemq/queues"
	"github.com/acemq/acemq/retry"
	"github.com/acemq/acemq/rpc"
	"github.com/acemq/acemq/topology"
	"github.com/spf13/cobra"
)

// demoURL is the demo's broker when --url is not given.
const demoURL = "memory://demo"

// demoDeadline bounds the whole demo.
const demoDeadline = 55 * time.Second

// Options are demo's flags, read by NewCmd's command.
type Options struct {
	cli.Invocation
	withConsole bool
	listen      string
}

// NewCmd is the demo command. When runF is not nil it runs instead of the
// command's own Run.
func NewCmd(runF func(*Options) error) *cobra.Command {
	f := &Options{}
	cmd := &cobra.Command{
		Use:   "demo",
		Short: "Run a small order system in one process and narrate every message",
		Long: `demo runs a small order system in one process: a publisher, a consumer
that accepts, retries, dead-letters and parks orders, and (as their packages
are available) a pricing service asked by request/reply, a large document
sent by claim check, a three-step route and a replay of a dead letter.

It narrates each message's envelope as it goes and ends with a table of what
every step did and counters of every settlement. It exits 0 only if every
step did what it says.

By default it runs on the in-process broker memory://demo and needs nothing
else. With --url amqp://… it runs against RabbitMQ, with uniquely named
queues and exchanges that it deletes at the end.

With --console it leaves the dead-lettered order in its .dlq, keeps the
broker and the consumers running, and serves the operator console on
--listen (127.0.0.1:8484) until Ctrl-C, so that you can look at the dead
letters in a browser and replay them (see 'acemq console --help').`,
		Example: `  acemq demo
  acemq demo --console
  acemq demo --url amqp://guest:guest@localhost:5672/`,
		Args: cobra.NoArgs,
		RunE: cli.RunE(f, runF),
	}
	cli.AddBrokerFlags(cmd, demoURL+"; $ACEMQ_URL is not used")
	cmd.Flags().BoolVar(&f.withConsole, "console", false, "keep the broker running afterwards and serve the operator console on it until Ctrl-C")
	cmd.Flags().StringVar(&f.listen, "listen", consolecmd.DefaultListen, "with --console, where to serve it (off loopback, a token is made up and printed)")
	return cmd
}

// Validate has nothing to check.
func (f *Options) Validate() error { return nil }

// Run runs the demo on --url (memory://demo by default), and with
// --console serves the console on its broker afterwards.
func (f *Options) Run() error {
	cmd := f.Cmd
	url := demoURL
	if u, _ := cmd.Flags().GetString("url"); u != "" {
		url = u
	}
	tlsOpts, err := cli.TLSOptions(cmd)
	if err != nil {
		return err
	}
	var hold func(context.Context, *demo) error
	if f.withConsole {
		hold = func(ctx context.Context, d *demo) error {
			opts := make([]console.Option, 0, len(d.topos))
			for _, t := range d.topos {
				opts = append(opts, console.WithTopology(t))
			}
			// The demo's own queues, by name: on a shared RabbitMQ the
			// management API would list everyone's.
			o := consolecmd.Options{Listen: f.listen, PeekLimit: console.DefaultPeekLimit}
			return consolecmd.Serve(ctx, cmd.OutOrStdout(), cmd.ErrOrStderr(), d.conn, url, o, nil, opts...)
		}
	}
	ok, err := runDemoWith(cmd.Context(), url, cmd.OutOrStdout(), hold, tlsOpts...)
	if err != nil {
		return err
	}
	if !ok {
		return cli.WithCode(cli.ExitFailure, errors.New("the demo did not do everything it says; see the table above"))
	}
	return nil
}

// order is the demo's payload.
type order struct {
	ID    string `json:"id"`
	SKU   string `json:"sku"`
	Qty   int    `json:"qty"`
	Note  string `json:"note,omitempty"`
	Pence int    `json:"pence,omitempty"`
}

// demo holds the state of one run.
type demo struct {
	conn *acemq.Conn
	out  io.Writer
	sfx  string

	// console, when set, serves the console on the demo's broker once the
	// steps are done, until its context ends; the replay step is left to
	// the operator.
	console func(ctx context.Context, d *demo) error
	topos   []*topology.Topology

	mu       sync.Mutex
	counters map[[2]string]int // queue, outcome
	steps    []demoStep
	cleanups []func(ctx context.Context)
}

// demoStep is one line of the summary: what a step promised and whether it
// did it.
type demoStep struct {
	name, promise, result string
	ok                    bool
}

// say narrates a line.
func (d *demo) say(format string, args ...any) {
	d.mu.Lock()
	defer d.mu.Unlock()
	fmt.Fprintf(d.out, format+"\n", args...)
}

// narrate prints an envelope in one line.
func (d *demo) narrate(verb, what string, env acemq.Envelope) {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-9s %-22s id=%s type=%s attempt=%d corr=%s", verb, what, short(env.ID()), env.Type(), env.Attempt(), short(env.CorrelationID()))
	if c := env.CausationID(); c != "" {
		fmt.Fprintf(&b, " cause=%s", short(c))
	}
	if o := env.Origin(); o != "" {
		fmt.Fprintf(&b, " origin=%s", o)
	}
	if age, ok := env.Age(); ok {
		fmt.Fprintf(&b, " age=%s", age.Round(time.Millisecond))
	}
	if f := env.Fields(); len(f.Route) > 0 {
		r := f.Route
		fmt.Fprintf(&b, " route=%s@%d", strings.Join(r, ","), f.RoutePosition)
	}
	if n, ok := env.Header(wire.HeaderReplayCount); ok {
		fmt.Fprintf(&b, " replays=%v", n)
	}
	if e := env.Reason(); e != "" {
		fmt.Fprintf(&b, " error=%q", e)
	}
	d.say("%s", b.String())
}

// narrateSettlement prints what the engine did with a delivery.
func (d *demo) narrateSettlement(s acemq.Settlement) {
	var b strings.Builder
	fmt.Fprintf(&b, "  %-9s %-22s id=%s %s on %s", "settle", string(s.Outcome), short(s.Envelope.ID()), s.Decision, d.queueLabel(s.Queue))
	if s.Target != "" {
		fmt.Fprintf(&b, " → %s", s.Target)
	}
	if s.Where != "" {
		fmt.Fprintf(&b, " (wait %s in the %s)", s.Delay, s.Where)
	}
	if s.Reason != "" && s.Outcome != acemq.OutcomeRetried {
		fmt.Fprintf(&b, " reason=%q", s.Reason)
	}
	d.say("%s", b.String())
}

// queueLabel shortens a demo queue name for narration.
func (d *demo) queueLabel(q string) string {
	if strings.HasPrefix(q, rpc.ReplyQueuePrefix) {
		return "the reply queue"
	}
	return strings.TrimPrefix(q, "acemq-demo-"+d.sfx+".")
}

// short abbreviates a UUID for narration.
func short(id string) string {
	if len(id) > 8 {
		return id[:8]
	}
	return id
}

// step records a step's result.
func (d *demo) step(name, promise string, err error, result string) {
	d.mu.Lock()
	defer d.mu.Unlock()
	s := demoStep{name: name, promise: promise, ok: err == nil, result: result}
	if err != nil {
		s.result = err.Error()
	}
	d.steps = append(d.steps, s)
	mark := "ok"
	if err != nil {
		mark = "FAILED"
	}
	fmt.Fprintf(d.out, "  => %s: %s (%s)\n\n", name, mark, s.result)
}

// count returns a settlement counter.
func (d *demo) count(queue string, o acemq.Outcome) int {
	d.mu.Lock()
	defer d.mu.Unlock()
	return d.counters[[2]string{queue, string(o)}]
}

// waitFor polls cond until it holds or ctx ends.
func waitFor(ctx context.Context, what string, cond func() bool) error {
	t := time.NewTicker(20 * time.Millisecond)
	defer t.Stop()
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("gave up waiting for %s: %w", what, ctx.Err())
		case <-t.C:
		}
	}
	return nil
}

// runDemoWith runs the demo against url; ok reports whether every step did
// what it says. When console is set, it runs console on the demo's broker
// once the steps are done (with the replay step left to the operator),
// before anything is deleted.
func runDemoWith(parent context.Context, url string, out io.Writer, console func(context.Context, *demo) error, opts ...acemq.ConnOption) (ok bool, err error) {
	ctx, cancel := context.WithTimeout(parent, demoDeadline)
	defer cancel()
	cctx, ccancel := context.WithTimeout(ctx, cli.ConnectTimeout)
	opts = append([]acemq.ConnOption{acemq.WithName("acemq demo"), acemq.WithOrigin("acemq-demo@" + hostPart())}, opts...)
	conn, err := acemq.Connect(cctx, url, opts...)
	ccancel()
	if err != nil {
		return false, cli.ConnectError(url, false, err)
	}
	d := &demo{conn: conn, out: out, sfx: cli.Suffix(), counters: map[[2]string]int{}, console: console}
	remove := conn.OnSettle(func(s acemq.Settlement) {
		d.mu.Lock()
		d.counters[[2]string{s.Queue, string(s.Outcome)}]++
		d.mu.Unlock()
		d.narrateSettlement(s)
	})
	start := time.Now()
	d.say("acemq demo on %s (names end in %s)\n", conn.URL(), d.sfx)

	d.runSteps(ctx)
	ok = d.summary(time.Since(start))
	if d.console != nil && ok {
		if cerr := d.console(parent, d); cerr != nil {
			err = cerr
		}
	}

	remove()
	cleanCtx, cleanCancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cleanCancel()
	for i := len(d.cleanups) - 1; i >= 0; i-- {
		d.cleanups[i](cleanCtx)
	}
	if err := conn.Close(cleanCtx); err != nil {
		d.say("closing the connection: %v", err)
	}
	return ok, err
}

// runSteps runs every step in order; a step that cannot run is recorded as
// failed and the rest still run where they can.
func (d *demo) runSteps(ctx context.Context) {
	q, err := d.setupOrders(ctx)
	if err != nil {
		d.step("topology", "declare the orders exchange and queue", err, "")
		return
	}
	d.ordersStep(ctx, q)
	d.pricingStep(ctx)
	d.documentStep(ctx)
	d.routeStep(ctx)
	if d.console != nil {
		d.say("step 5: replay — left to you: open the console below, look at %s and replay it", contract.DeadLetterQueue(q.queue))
		return
	}
	d.replayStep(ctx, q)
	d.exactlyOnceStep(ctx)
}

// names of the orders part.
type ordersNames struct {
	exchange, queue string
	policy          retry.Policy
}

// setupOrders declares the orders exchange (topic) and queue (quorum, with
// the broker's dead-letter backstop and the retry rung its consumer's
// policy waits on) and registers their deletion.
func (d *demo) setupOrders(ctx context.Context) (ordersNames, error) {
	n := ordersNames{
		exchange: "acemq-demo-" + d.sfx + ".orders",
		queue:    "acemq-demo-" + d.sfx + ".orders.new",
		policy:   retry.Fixed(2, time.Second).WaitInBrokerFrom(time.Second),
	}
	topo := topology.New().
		Exchange(n.exchange, topology.ExchangeTopic).
		Queue(n.queue, topology.WithDeadLettering(true), acemq.WithRetry(n.policy)).
		Bind(n.exchange, n.queue, "order.*")
	if err := d.apply(ctx, topo); err != nil {
		return n, err
	}
	d.say("topology: exchange %s (topic) → queue %s (quorum), binding order.*", n.exchange, n.queue)
	d.say("          dead letters go to %s, parked messages to %s\n", contract.DeadLetterQueue(n.queue), contract.ParkedQueue(n.queue))
	return n, nil
}

// closeAtEnd registers a consumer's (or responder's) Close, run before the
// queues it reads are deleted.
func (d *demo) closeAtEnd(close func(context.Context) error) {
	d.cleanups = append(d.cleanups, func(ctx context.Context) {
		if err := close(ctx); err != nil {
			d.say("cleanup: %v", err)
		}
	})
}

// apply declares topo and registers its deletion at the end (the library's
// shared acemq.dlx and acemq.retry stay: Topology.Delete never deletes
// them).
func (d *demo) apply(ctx context.Context, topo *topology.Topology) error {
	d.deleteAtEnd(topo)
	return topo.Apply(ctx, d.conn)
}

// deleteAtEnd registers topo's deletion at the end.
func (d *demo) deleteAtEnd(topo *topology.Topology) {
	d.topos = append(d.topos, topo)
	d.cleanups = append(d.cleanups, func(ctx context.Context) {
		if err := topo.Delete(ctx, d.conn); err != nil {
			d.say("cleanup: %v", err)
		}
	})
}

// declareQueue declares a durable (so quorum) queue for a step and
// registers it, and the dead-letter half its consumer declares, for
// deletion.
func (d *demo) declareQueue(ctx context.Context, name string) error {
	d.deleteAtEnd(topology.New().Queue(contract.DeadLetterQueue(name)).Queue(contract.ParkedQueue(name)))
	return d.apply(ctx, topology.New().Queue(name))
}

// ordersStep publishes orders and consumes them: most are accepted, one
// fails once and is retried through a broker rung, a poison order ends in
// .dlq and an unreadable one is parked.
func (d *demo) ordersStep(ctx context.Context, n ordersNames) {
	const promise = "accept 4 orders, one of them after a retry through a broker rung; dead-letter 1 poison order; park 1 unreadable"
	d.say("step 1: orders — %s", promise)
	policy := n.policy
	d.say("  retry policy %s: a retry waits 1 s on the rung %s", policy, contract.RungQueue(n.queue, time.Second))

	c, err := acemq.Consume(ctx, d.conn, n.queue, d.orderHandler(), acemq.WithRetry(policy), acemq.WithDrainTimeout(5*time.Second))
	if err != nil {
		d.step("orders", promise, err, "")
		return
	}
	d.closeAtEnd(c.Close)
	if err := d.publishOrders(ctx, n); err != nil {
		d.step("orders", promise, err, "")
		return
	}
	err = d.ordersSettled(ctx, n)
	d.step("orders", promise, err, fmt.Sprintf("%d acked, %d retried, %d rejected to .dlq, %d parked",
		d.count(n.queue, acemq.OutcomeAcked), d.count(n.queue, acemq.OutcomeRetried),
		d.count(n.queue, acemq.OutcomeRejected), d.count(n.queue, acemq.OutcomeParked)))
}

// orderHandler accepts the orders, asks for a retry of the flaky one the
// first time, and rejects the poison one unless it was replayed.
func (d *demo) orderHandler() acemq.Handler[order] {
	var failedOnce sync.Map
	return func(ctx context.Context, m acemq.Message[order]) acemq.Ack {
		o := m.Payload
		d.narrate("consume", o.ID+" ("+o.Note+")", m.Envelope)
		switch o.Note {
		case "flaky":
			if _, loaded := failedOnce.LoadOrStore(o.ID, true); !loaded {
				d.say("            %s: the warehouse timed out; asking for a retry", o.ID)
				return acemq.Retry(errors.New("the warehouse did not answer in time"))
			}
			d.say("            %s: succeeded on attempt %d", o.ID, m.Envelope.Attempt())
		case "poison":
			if from, ok := m.Envelope.Header(wire.HeaderReplayedFrom); ok {
				d.say("            %s: replayed from %v after the quantity rule was fixed; accepting", o.ID, from)
				return acemq.Accept()
			}
			d.say("            %s: quantity %d can never be fulfilled; rejecting", o.ID, o.Qty)
			return acemq.Reject(&reasons.InvalidOrderError{ID: o.ID, Reason: fmt.Sprintf("quantity %d", o.Qty)})
		}
		return acemq.Accept()
	}
}

// publishOrders publishes the five orders, then one whose body is not
// JSON.
func (d *demo) publishOrders(ctx context.Context, n ordersNames) error {
	pub := acemq.NewPublisher[order](d.conn, n.exchange)
	orders := []order{
		{ID: "o-1", SKU: "A-1", Qty: 1, Note: "ok"},
		{ID: "o-2", SKU: "B-7", Qty: 3, Note: "ok"},
		{ID: "o-3", SKU: "C-2", Qty: 2, Note: "flaky"},
		{ID: "o-4", SKU: "D-9", Qty: -5, Note: "poison"},
		{ID: "o-5", SKU: "E-3", Qty: 1, Note: "ok"},
	}
	for _, o := range orders {
		env, err := pub.Send(ctx, "order.placed", o)
		if err != nil {
			return fmt.Errorf("publishing %s: %w", o.ID, err)
		}
		d.narrate("publish", o.ID+" ("+o.Note+")", typed(env, "order.placed"))
	}
	// An order whose body is not JSON: the consumer cannot decode it, so the
	// handler never sees it and the engine parks it. The raw codec sends the
	// bytes as they are, labelled JSON.
	bad := acemq.MustEnvelope(acemq.Fields{Type: "order.placed"})
	unreadable := acemq.NewPublisher[[]byte](d.conn, n.exchange, acemq.WithCodec(cli.RawCodec{Type: "application/json"}))
	sent, err := unreadable.Send(ctx, "order.placed", []byte("{o-6: not json"), acemq.WithEnvelope(bad))
	if err != nil {
		return fmt.Errorf("publishing the unreadable order: %w", err)
	}
	d.narrate("publish", "o-6 (unreadable)", sent)
	return nil
}

// ordersSettled waits until every order is settled as the step promises,
// with one in the .dlq and one parked.
func (d *demo) ordersSettled(ctx context.Context, n ordersNames) error {
	want := func() bool {
		return d.count(n.queue, acemq.OutcomeAcked) >= 4 &&
			d.count(n.queue, acemq.OutcomeRetried) >= 1 &&
			d.count(n.queue, acemq.OutcomeRejected) >= 1 &&
			d.count(n.queue, acemq.OutcomeParked) >= 1
	}
	wctx, wcancel := context.WithTimeout(ctx, 20*time.Second)
	err := waitFor(wctx, "every order to be settled", want)
	wcancel()
	if err == nil {
		err = d.expectQueue(ctx, contract.DeadLetterQueue(n.queue), 1)
	}
	if err == nil {
		err = d.expectQueue(ctx, contract.ParkedQueue(n.queue), 1)
	}
	return err
}

// expectQueue checks that a queue holds n messages, polling briefly since a
// broker's count can lag a confirm.
func (d *demo) expectQueue(ctx context.Context, q string, n int) error {
	var got int
	var lastErr error
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err := waitFor(wctx, q+" to hold "+fmt.Sprint(n), func() bool {
		info, err := queues.Inspect(wctx, d.conn, q)
		if err != nil {
			lastErr = err
			return false
		}
		got = info.Messages
		return got == n
	})
	if err != nil {
		if lastErr != nil {
			return fmt.Errorf("%s: %w", q, lastErr)
		}
		return fmt.Errorf("%s holds %d messages, expected %d", q, got, n)
	}
	return nil
}

// summary prints the tables and reports whether every step succeeded.
func (d *demo) summary(took time.Duration) bool {
	d.mu.Lock()
	defer d.mu.Unlock()
	ok := len(d.steps) > 0
	tw := tabwriter.NewWriter(d.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "STEP\tRESULT\tWHAT HAPPENED")
	for _, s := range d.steps {
		mark := "ok"
		if !s.ok {
			mark = "FAILED"
			ok = false
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\n", s.name, mark, s.result)
	}
	tw.Flush()
	fmt.Fprintln(d.out)

	keys := make([][2]string, 0, len(d.counters))
	for k := range d.counters {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool {
		if keys[i][0] != keys[j][0] {
			return keys[i][0] < keys[j][0]
		}
		return keys[i][1] < keys[j][1]
	})
	tw = tabwriter.NewWriter(d.out, 2, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "QUEUE\tOUTCOME\tSETTLED")
	for _, k := range keys {
		fmt.Fprintf(tw, "%s\t%s\t%d\n", k[0], k[1], d.counters[k])
	}
	tw.Flush()
	fmt.Fprintln(d.out)
	if ok {
		fmt.Fprintf(d.out, "every step did what it says (%s)\n", took.Round(time.Millisecond))
	} else {
		fmt.Fprintf(d.out, "some steps FAILED (%s)\n", took.Round(time.Millisecond))
	}
	return ok
}

// typed is env as a publish with routingKey wrote it: an envelope sent
// without a type is typed with the routing key on the wire.
func typed(env acemq.Envelope, routingKey string) acemq.Envelope {
	if env.Type() != "" {
		return env
	}
	t, err := env.Change(func(f *acemq.Fields) { f.Type = routingKey })
	if err != nil {
		return env
	}
	return t
}

// hostPart is this machine's host name as the default origin names it.
func hostPart() string {
	o := wire.DefaultOrigin()
	if _, h, ok := strings.Cut(o, "@"); ok {
		return h
	}
	return "unknown-host"
}
