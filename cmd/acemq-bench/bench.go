package main

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"strings"
	"sync"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/driver"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/perf"
	"github.com/acemq/acemq/topology"
	"github.com/schollz/progressbar/v3"
	"github.com/spf13/cobra"
)

// Options are acemq-bench's flags, read by newRootCmd's command.
type Options struct {
	cli.Invocation
	url string // --url (or its default)

	messages   int
	size       int
	queueType  string
	producers  int
	consumers  int
	window     int
	prefetch   int
	rpc        bool
	requests   int
	compareRaw bool
	json       bool
	timeout    time.Duration
	// metricsAddr serves the actuator endpoints while the bench runs.
	metricsAddr string
}

// benchResult is one measured phase.
type benchResult struct {
	Phase string `json:"phase"` // publish, consume, request
	// Client is acemq, raw (amqp091-go sending the body alone) or
	// raw-headers (amqp091-go sending the contract's headers too).
	Client   string  `json:"client"`
	Messages int     `json:"messages"`
	Errors   int     `json:"errors"`
	Seconds  float64 `json:"seconds"`
	Rate     float64 `json:"ratePerSecond"`
	P50      float64 `json:"p50Ms"`
	P95      float64 `json:"p95Ms"`
	P99      float64 `json:"p99Ms"`
	Max      float64 `json:"maxMs"`
}

// benchRatio compares acemq with the raw client for one phase.
type benchRatio struct {
	Phase string `json:"phase"`
	// Throughput is acemq's rate divided by the raw client's (1 = as fast).
	Throughput float64 `json:"throughput"`
	// P50 is acemq's median latency divided by the raw client's (1 = as
	// quick; above 1 = slower).
	P50 float64 `json:"p50"`
}

// benchReport is what bench --json prints.
type benchReport struct {
	URL string `json:"url"`
	// Endpoint is the node (one URL of --url's list, password redacted)
	// the run's connection was on when it started.
	Endpoint string `json:"endpoint"`
	// QueuePrefix begins the names of the queues the run created (and
	// deleted).
	QueuePrefix string        `json:"queuePrefix"`
	Messages    int           `json:"messages"`
	Size        int           `json:"size"`
	QueueType   string        `json:"queueType"`
	Producers   int           `json:"producers"`
	Consumers   int           `json:"consumers"`
	Window      int           `json:"confirmWindow"`
	Prefetch    int           `json:"prefetch"`
	Requests    int           `json:"requests,omitempty"`
	Results     []benchResult `json:"results"`
	// Ratios divide acemq's figures by raw amqp091-go sending a bare body:
	// the contract's cost and the library's together.
	Ratios []benchRatio `json:"ratios,omitempty"`
	// SameWorkRatios divide them by raw amqp091-go sending the contract's
	// headers (UUID ids included) with the same confirms, windows,
	// prefetch and acknowledgements: the library's cost alone.
	SameWorkRatios []benchRatio `json:"sameWorkRatios,omitempty"`
	// ReferenceNote says in one line which ratios are which (set with
	// --compare-raw).
	ReferenceNote string `json:"referenceNote,omitempty"`
	OK            bool   `json:"ok"`
	FailReason    string `json:"failReason,omitempty"`
}

// newRootCmd is the acemq-bench command.
func newRootCmd() *cobra.Command {
	f := &Options{}
	cmd := &cobra.Command{
		Use:   "acemq-bench [--url URL] [--messages N] [--size B] [--queue-type quorum|classic] [--producers P] [--consumers C] [--confirm-window W] [--rpc] [--compare-raw] [--json]",
		Short: "Measure publish, consume and request/reply throughput and latency",
		Long: `acemq-bench measures the broker through the library, as RabbitMQ's PerfTest does:
P producers publish N messages of B bytes (persistent, mandatory, each
confirmed; each producer keeps up to W publishes waiting for a confirm) to a
fresh queue while C consumers read and acknowledge them.

It reports, for each phase, the rate in messages per second and the latency
percentiles p50, p95, p99 and max:

  publish   from a publish to its confirm
  consume   from the publish to the delivery (end to end; every message
            carries its send time in its first 8 bytes)
  request   (--rpc) a round trip through a responder that echoes the body,
            with P callers at once

--compare-raw runs the same work through plain github.com/rabbitmq/amqp091-go
in the same run (the same queue type, confirms, windows, mandatory, prefetch
and acknowledgements), twice, and prints acemq's figures divided by each:

  same work  raw-headers: amqp091-go writing by hand the headers the
             envelope puts on every message, UUID message ids included.
             acemq ÷ raw-headers is the library's cost (building and
             reading envelopes, codecs, settlement, telemetry).
  bare body  raw: amqp091-go sending the body alone. acemq ÷ raw adds the
             contract's cost: the header bytes, which amqp091-go and the
             broker pay for whichever client sends them.

It needs an amqp:// or amqps:// URL.

Numbers from one run on a shared machine are indicative: run several times
and on an idle broker before drawing conclusions. acemq-bench deletes the queues it
creates (acemq-bench-*). It exits 1 if any message was lost or failed.`,
		Example: `  acemq-bench --messages 20000 --size 512 --producers 2 --consumers 2
  acemq-bench --rpc --compare-raw --json`,
		Args: cobra.NoArgs,
		RunE: cli.RunE(f, nil),
	}
	f.addFlags(cmd)
	return cmd
}

// Complete records the command and the broker's URL.
func (f *Options) Complete(cmd *cobra.Command, args []string) {
	f.Invocation.Complete(cmd, args)
	f.url, _ = cli.BrokerURL(cmd)
}

// addFlags defines acemq-bench's flags on cmd.
func (f *Options) addFlags(cmd *cobra.Command) {
	cli.AddBrokerFlags(cmd, cli.SharedURLDefault)
	cli.AddWaitFlag(cmd)
	fl := cmd.Flags()
	fl.IntVar(&f.messages, "messages", 10000, "messages to publish and consume")
	fl.IntVar(&f.size, "size", 1024, fmt.Sprintf("body size in bytes (at least %d)", perf.StampSize))
	fl.StringVar(&f.queueType, "queue-type", "quorum", "queue type: quorum or classic")
	fl.IntVar(&f.producers, "producers", 1, "concurrent publishers (and concurrent callers with --rpc)")
	fl.IntVar(&f.consumers, "consumers", 1, "concurrent consumers")
	fl.IntVar(&f.window, "confirm-window", 100, "publishes each producer keeps waiting for a confirm")
	fl.IntVar(&f.prefetch, "prefetch", 200, "prefetch of each consumer")
	fl.BoolVar(&f.rpc, "rpc", false, "also measure request/reply")
	fl.IntVar(&f.requests, "requests", 2000, "requests to make with --rpc")
	fl.BoolVar(&f.compareRaw, "compare-raw", false, "run the same work through plain amqp091-go and print the ratio")
	fl.BoolVar(&f.json, "json", false, "print the report as one JSON object")
	cli.AddMetricsFlag(fl, &f.metricsAddr)
	fl.DurationVar(&f.timeout, "timeout", 10*time.Minute, "give up after this long")
}

// Validate checks the flags before anything connects.
func (f *Options) Validate() error {
	if err := f.check(); err != nil {
		return cli.WithCode(cli.ExitFailure, err)
	}
	return nil
}

// check says what is wrong with the flags, if anything.
func (f *Options) check() error {
	url := f.url
	switch {
	case f.messages < 1:
		return fmt.Errorf("--messages must be at least 1, not %d", f.messages)
	case f.size < perf.StampSize:
		return fmt.Errorf("--size must be at least %d (the send time rides in the first %d bytes), not %d", perf.StampSize, perf.StampSize, f.size)
	case f.queueType != "quorum" && f.queueType != "classic":
		return fmt.Errorf("--queue-type must be quorum or classic, not %q", f.queueType)
	case f.producers < 1 || f.consumers < 1:
		return fmt.Errorf("--producers and --consumers must be at least 1")
	case f.window < 1:
		return fmt.Errorf("--confirm-window must be at least 1, not %d", f.window)
	case f.prefetch < 1:
		return fmt.Errorf("--prefetch must be at least 1, not %d", f.prefetch)
	case f.rpc && f.requests < 1:
		return fmt.Errorf("--requests must be at least 1, not %d", f.requests)
	case f.compareRaw && !strings.HasPrefix(url, "amqp://") && !strings.HasPrefix(url, "amqps://"):
		return fmt.Errorf("--compare-raw needs an amqp:// or amqps:// URL (plain amqp091-go cannot reach %s)", driver.RedactURL(url))
	}
	return nil
}

// Run measures the broker and prints the report.
func (f *Options) Run() error {
	cmd := f.Cmd
	ctx, cancel := context.WithTimeout(cmd.Context(), f.timeout)
	defer cancel()
	rawTLS, err := cli.TLSConfig(cmd)
	if err != nil {
		return err
	}
	s, err := cli.OpenSession(cmd, f.metricsAddr, acemq.WithMaxOutstanding(max(1000, f.producers*f.window)))
	if err != nil {
		return err
	}
	defer s.Close()

	b := &bench{f: *f, conn: s.Conn, url: endpointURL(f.url, s.Conn.Endpoint()), tls: rawTLS, sfx: cli.Suffix(), progress: cli.StderrIsTerminal(cmd) && !f.json, errOut: cmd.ErrOrStderr()}
	defer b.cleanup()
	rep := benchReport{URL: s.Conn.URL(), Endpoint: s.Conn.Endpoint(), QueuePrefix: "acemq-bench-" + b.sfx + ".", Messages: f.messages, Size: f.size, QueueType: f.queueType,
		Producers: f.producers, Consumers: f.consumers, Window: f.window, Prefetch: f.prefetch, OK: true}
	if f.rpc {
		rep.Requests = f.requests
	}
	b.pubSub(ctx, &rep)
	if f.rpc && ctx.Err() == nil {
		b.requestReply(ctx, &rep)
	}
	if ctx.Err() != nil {
		rep.fail(fmt.Errorf("stopped: %w", ctx.Err()))
	}
	return f.print(rep)
}

// fail marks the report failed, with the first reason given.
func (rep *benchReport) fail(err error) {
	if rep.OK {
		rep.OK, rep.FailReason = false, err.Error()
	}
}

// add adds results to the report; one with errors fails it.
func (rep *benchReport) add(err error, rs ...benchResult) {
	if err != nil {
		rep.fail(err)
	}
	for _, r := range rs {
		rep.Results = append(rep.Results, r)
		if r.Errors > 0 {
			rep.fail(fmt.Errorf("%s (%s): %d of %d failed", r.Phase, r.Client, r.Errors, r.Messages))
		}
	}
}

// pubSub measures publishing and consuming through acemq, and with
// --compare-raw through plain amqp091-go, with and without the headers.
func (b *bench) pubSub(ctx context.Context, rep *benchReport) {
	b.status("publish and consume through acemq")
	pub, con, err := b.acemqPubSub(ctx)
	rep.add(err, pub, con)
	if b.f.compareRaw && ctx.Err() == nil {
		rep.ReferenceNote = referenceNote
		b.status("publish and consume through plain amqp091-go, with the contract's headers")
		hpub, hcon, err := b.rawPubSub(ctx, true)
		rep.add(err, hpub, hcon)
		rep.SameWorkRatios = append(rep.SameWorkRatios, ratio("publish", pub, hpub), ratio("consume", con, hcon))
	}
	if b.f.compareRaw && ctx.Err() == nil {
		b.status("publish and consume through plain amqp091-go, bare bodies")
		rpub, rcon, err := b.rawPubSub(ctx, false)
		rep.add(err, rpub, rcon)
		rep.Ratios = append(rep.Ratios, ratio("publish", pub, rpub), ratio("consume", con, rcon))
	}
}

// requestReply measures request/reply through acemq, and with
// --compare-raw through plain amqp091-go, with and without the headers.
func (b *bench) requestReply(ctx context.Context, rep *benchReport) {
	b.status("request/reply through acemq")
	req, err := b.acemqRPC(ctx)
	rep.add(err, req)
	if b.f.compareRaw && ctx.Err() == nil {
		b.status("request/reply through plain amqp091-go, with the contract's headers")
		hreq, err := b.rawRPC(ctx, true)
		rep.add(err, hreq)
		rep.SameWorkRatios = append(rep.SameWorkRatios, ratio("request", req, hreq))
	}
	if b.f.compareRaw && ctx.Err() == nil {
		b.status("request/reply through plain amqp091-go, bare bodies")
		rreq, err := b.rawRPC(ctx, false)
		rep.add(err, rreq)
		rep.Ratios = append(rep.Ratios, ratio("request", req, rreq))
	}
}

// print prints the report, as JSON or a table, and fails the command when
// the run failed.
func (f *Options) print(rep benchReport) error {
	out := f.Cmd.OutOrStdout()
	if f.json {
		bs, err := cli.MarshalLine(rep)
		if err != nil {
			return err
		}
		_, _ = out.Write(bs)
	} else {
		printBench(out, rep)
	}
	if !rep.OK {
		return cli.WithCode(cli.ExitFailure, errors.New(rep.FailReason))
	}
	return nil
}

// endpointURL returns the URL of list (--url, one URL or several) that the
// redacted endpoint names, password included: the node the plain amqp091-go
// half of --compare-raw dials, the acemq half's, so that both do the same
// work on the same node. It is the first URL when none matches.
func endpointURL(list, endpoint string) string {
	urls := driver.SplitURLs(list)
	for _, u := range urls {
		if driver.RedactURL(u) == endpoint {
			return u
		}
	}
	return urls[0]
}

// bench holds one run's shared state.
type bench struct {
	f        Options
	conn     *acemq.Conn
	url      string
	tls      *tls.Config // for the raw client; nil means the system roots
	sfx      string
	progress bool
	errOut   io.Writer

	mu        sync.Mutex
	deletions []*topology.Topology
}

func (b *bench) status(s string) {
	if b.progress {
		fmt.Fprintf(b.errOut, "bench: %s…\n", s)
	}
}

// queue declares a fresh durable queue of the configured type and
// registers it (and the dead-letter half a consumer declares) for deletion.
func (b *bench) queue(ctx context.Context, name string) (string, error) {
	q := "acemq-bench-" + b.sfx + "." + name
	b.mu.Lock()
	b.deletions = append(b.deletions, topology.New().Queue(q, topology.WithDeadLettering(true)))
	b.mu.Unlock()
	topo := topology.New().Queue(q, topology.WithQueueType(topology.QueueType(b.f.queueType)))
	if err := topo.Apply(ctx, b.conn); err != nil {
		return "", fmt.Errorf("declaring %s: %w", q, err)
	}
	return q, nil
}

func (b *bench) cleanup() {
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, topo := range b.deletions {
		if err := topo.Delete(ctx, b.conn); err != nil {
			fmt.Fprintf(b.errOut, "acemq: %v\n", err)
		}
	}
}

// bar is a progress bar on stderr, or nil.
func (b *bench) bar(n int, what string) *progressbar.ProgressBar {
	if !b.progress {
		return nil
	}
	return progressbar.NewOptions(n, progressbar.OptionSetWriter(b.errOut), progressbar.OptionSetDescription(what),
		progressbar.OptionShowCount(), progressbar.OptionShowIts(), progressbar.OptionThrottle(100*time.Millisecond),
		progressbar.OptionClearOnFinish())
}

// tick advances bar, when there is one.
func tick(bar *progressbar.ProgressBar) {
	if bar != nil {
		_ = bar.Add(1)
	}
}

// finish completes bar, when there is one.
func finish(bar *progressbar.ProgressBar) {
	if bar != nil {
		_ = bar.Finish()
	}
}

// body is a message body of the configured size carrying its send time.
func (b *bench) body() []byte { return perf.Stamp(b.f.size) }

// delivered records the end-to-end latency of a delivery of body.
func delivered(lat *perf.Latencies, body []byte) {
	now := time.Now()
	if t, ok := perf.SentAt(body); ok {
		lat.Add(now.Sub(t), now)
	}
}

// benchStall is how long the consumers may go without a delivery before
// the messages still missing are counted as lost.
const benchStall = 30 * time.Second

// firstError keeps the first error reported by many goroutines.
type firstError struct {
	mu  sync.Mutex
	err error
}

func (f *firstError) set(err error) {
	f.mu.Lock()
	if f.err == nil {
		f.err = err
	}
	f.mu.Unlock()
}

func (f *firstError) get() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.err
}

// phaseResult summarises the latencies of a phase of total operations, errs of
// which failed, that took elapsed.
func phaseResult(phase, client string, lat *perf.Latencies, total, errs int, elapsed time.Duration) benchResult {
	s := lat.Summary()
	return benchResult{
		Phase: phase, Client: client, Messages: total, Errors: errs, Seconds: elapsed.Seconds(),
		Rate: perf.Rate(s.Count, elapsed),
		P50:  ms(s.P50), P95: ms(s.P95), P99: ms(s.P99), Max: ms(s.Max),
	}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

// referenceNote says which ratios are which, in the text report and in
// --json.
const referenceNote = "same work (sameWorkRatios) = acemq ÷ amqp091-go sending the contract's headers: the library's cost; bare body (ratios) = acemq ÷ amqp091-go sending the body alone: adds the contract's cost (the header bytes)"

// Names of the raw clients in the results.
const (
	rawClient        = "raw"
	rawHeadersClient = "raw-headers"
)

// ratio divides acemq's figures by the raw client's.
func ratio(phase string, a, raw benchResult) benchRatio {
	r := benchRatio{Phase: phase}
	if raw.Rate > 0 {
		r.Throughput = a.Rate / raw.Rate
	}
	if raw.P50 > 0 {
		r.P50 = a.P50 / raw.P50
	}
	return r
}
