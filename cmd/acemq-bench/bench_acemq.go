package main

import (
	"context"
	"fmt"
	"io"
	"slices"
	"sync"
	"sync/atomic"
	"text/tabwriter"
	"time"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/perf"
	"github.com/acemq/acemq/rpc"
	"github.com/schollz/progressbar/v3"
)

// acemqPubSub publishes and consumes through the library: f.consumers
// consumers at f.prefetch, and f.producers producers each keeping up to
// f.window Sends waiting for their confirm.
func (b *bench) acemqPubSub(ctx context.Context) (pub, con benchResult, err error) {
	f := b.f
	q, err := b.queue(ctx, "acemq")
	if err != nil {
		return benchResult{Phase: "publish", Client: "acemq"}, benchResult{Phase: "consume", Client: "acemq"}, err
	}
	var conLat perf.Latencies
	done := perf.NewCountdown(f.messages)
	codec := acemq.WithCodec(cli.RawCodec{Type: "application/octet-stream"})
	consumers, err := b.acemqConsumers(ctx, q, codec, &conLat, done)
	defer func() {
		for _, c := range consumers {
			cli.CloseQuietly(c.Close)
		}
	}()
	if err != nil {
		return benchResult{Phase: "publish", Client: "acemq"}, benchResult{Phase: "consume", Client: "acemq"}, err
	}

	p := acemq.NewPublisher[[]byte](b.conn, "", codec)
	var pubLat perf.Latencies
	var failed atomic.Int64
	var firstErr firstError
	bar := b.bar(f.messages, "publish")
	start := time.Now()
	b.acemqPublish(ctx, p, q, bar, &pubLat, &failed, &firstErr)
	pubElapsed := time.Since(start)
	finish(bar)
	pub = phaseResult("publish", "acemq", &pubLat, f.messages, int(failed.Load()), pubElapsed)
	if failed.Load() == 0 {
		done.Wait(ctx, benchStall)
	}
	con = phaseResult("consume", "acemq", &conLat, f.messages, f.messages-conLat.Count(), conLat.Summary().Last.Sub(start))
	if e := firstErr.get(); e != nil {
		return pub, con, fmt.Errorf("publishing through acemq: %w", e)
	}
	return pub, con, ctx.Err()
}

// acemqConsumers starts f.consumers consumers on q, each recording the
// latency of what it is delivered and counting it down; it returns those
// it started, also when one fails to start.
func (b *bench) acemqConsumers(ctx context.Context, q string, codec acemq.CodecOption, lat *perf.Latencies, done *perf.Countdown) ([]*acemq.Consumer, error) {
	var consumers []*acemq.Consumer
	for i := 0; i < b.f.consumers; i++ {
		c, err := acemq.Consume(ctx, b.conn, q, func(_ context.Context, m acemq.Message[[]byte]) acemq.Ack {
			delivered(lat, m.Body)
			done.Tick()
			return acemq.Accept()
		}, codec, acemq.WithPrefetch(b.f.prefetch), acemq.WithConsumerTag(fmt.Sprintf("acemq-bench-%d", i+1)))
		if err != nil {
			return consumers, err
		}
		consumers = append(consumers, c)
	}
	return consumers, nil
}

// acemqPublish sends f.messages to q through p from f.producers
// producers, each keeping up to f.window Sends waiting for their confirm.
func (b *bench) acemqPublish(ctx context.Context, p *acemq.Publisher[[]byte], q string, bar *progressbar.ProgressBar, lat *perf.Latencies, failed *atomic.Int64, firstErr *firstError) {
	var wg sync.WaitGroup
	for _, n := range perf.Shares(b.f.messages, b.f.producers) {
		wg.Go(func() {
			sem := make(chan struct{}, b.f.window)
			var inner sync.WaitGroup
			for i := 0; i < n && ctx.Err() == nil; i++ {
				sem <- struct{}{}
				inner.Go(func() {
					defer func() { <-sem }()
					body := b.body()
					t0 := time.Now()
					if _, err := p.Send(ctx, q, body); err != nil {
						failed.Add(1)
						firstErr.set(err)
						return
					}
					lat.Since(t0)
					tick(bar)
				})
			}
			inner.Wait()
		})
	}
	wg.Wait()
}

// acemqRPC measures request/reply through the rpc package.
func (b *bench) acemqRPC(ctx context.Context) (benchResult, error) {
	f := b.f
	res := benchResult{Phase: "request", Client: "acemq", Messages: f.requests}
	q, err := b.queue(ctx, "rpc")
	if err != nil {
		return res, err
	}
	codec := cli.RawCodec{Type: "application/octet-stream"}
	resp, err := rpc.Serve(ctx, b.conn, q, func(_ context.Context, m acemq.Message[[]byte]) ([]byte, error) {
		return m.Payload, nil
	}, acemq.WithCodec(codec), acemq.WithPrefetch(f.prefetch), acemq.WithConcurrency(f.producers))
	if err != nil {
		return res, err
	}
	defer cli.CloseQuietly(resp.Close)
	req, err := rpc.Open[[]byte, []byte](ctx, b.conn, "", q, rpc.WithCodec(codec), rpc.WithTimeout(benchCallTimeout))
	if err != nil {
		return res, err
	}
	defer cli.CloseQuietly(req.Close)
	return b.rounds(ctx, "acemq", "asking through acemq", func() error {
		_, err := req.Ask(ctx, b.body())
		return err
	})
}

// benchCallTimeout is how long a call waits for its reply, on both sides.
const benchCallTimeout = rpc.DefaultTimeout

// rounds runs f.requests round trips, f.producers at once, each timed from
// before ask to its return, and summarises them as the request phase of
// client.
func (b *bench) rounds(ctx context.Context, client, what string, ask func() error) (benchResult, error) {
	f := b.f
	var lat perf.Latencies
	var firstErr firstError
	label := "request"
	if client != "acemq" {
		label += " (" + client + ")"
	}
	bar := b.bar(f.requests, label)
	start := time.Now()
	var wg sync.WaitGroup
	for _, n := range perf.Shares(f.requests, f.producers) {
		wg.Go(func() {
			for i := 0; i < n && ctx.Err() == nil; i++ {
				t0 := time.Now()
				if err := ask(); err != nil {
					firstErr.set(err)
					continue
				}
				lat.Since(t0)
				tick(bar)
			}
		})
	}
	wg.Wait()
	finish(bar)
	res := phaseResult("request", client, &lat, f.requests, f.requests-lat.Count(), time.Since(start))
	if e := firstErr.get(); e != nil {
		return res, fmt.Errorf("%s: %w", what, e)
	}
	return res, ctx.Err()
}

// printBench prints the report as tables.
func printBench(w io.Writer, rep benchReport) {
	on := rep.URL
	if rep.Endpoint != "" && rep.Endpoint != rep.URL {
		on = rep.Endpoint + " (of " + rep.URL + ")"
	}
	fmt.Fprintf(w, "acemq-bench on %s: %d messages of %d bytes, %s queue, %d producer(s), %d consumer(s), confirm window %d, prefetch %d\n\n",
		on, rep.Messages, rep.Size, rep.QueueType, rep.Producers, rep.Consumers, rep.Window, rep.Prefetch)
	tw := tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
	fmt.Fprintln(tw, "PHASE\tCLIENT\tMESSAGES\tFAILED\tSECONDS\tMSG/S\tP50 MS\tP95 MS\tP99 MS\tMAX MS\t")
	for _, r := range rep.Results {
		fmt.Fprintf(tw, "%s\t%s\t%d\t%d\t%.2f\t%.0f\t%.2f\t%.2f\t%.2f\t%.2f\t\n", r.Phase, r.Client, r.Messages, r.Errors, r.Seconds, r.Rate, r.P50, r.P95, r.P99, r.Max)
	}
	tw.Flush()
	if len(rep.Ratios) > 0 || len(rep.SameWorkRatios) > 0 {
		fmt.Fprintln(w, "\nacemq ÷ amqp091-go (throughput above 1 is faster; p50 above 1 is slower):")
		fmt.Fprintln(w, rep.ReferenceNote)
		tw = tabwriter.NewWriter(w, 2, 4, 2, ' ', tabwriter.AlignRight)
		fmt.Fprintln(tw, "PHASE\tSAME WORK THROUGHPUT\tSAME WORK P50\tBARE BODY THROUGHPUT\tBARE BODY P50\t")
		for _, phase := range ratioPhases(rep) {
			fmt.Fprintf(tw, "%s\t%s\t%s\t\n", phase, ratioCells(rep.SameWorkRatios, phase), ratioCells(rep.Ratios, phase))
		}
		tw.Flush()
	}
	if rep.OK {
		fmt.Fprintln(w, "\nevery message was confirmed and delivered")
	} else {
		fmt.Fprintf(w, "\nFAILED: %s\n", rep.FailReason)
	}
}

// ratioPhases lists the phases that have a ratio, in the order measured.
func ratioPhases(rep benchReport) []string {
	var phases []string
	for _, rs := range [][]benchRatio{rep.SameWorkRatios, rep.Ratios} {
		for _, r := range rs {
			if !slices.Contains(phases, r.Phase) {
				phases = append(phases, r.Phase)
			}
		}
	}
	return phases
}

// ratioCells are the throughput and p50 cells of phase's ratio in rs, or
// dashes when the run did not get that far.
func ratioCells(rs []benchRatio, phase string) string {
	for _, r := range rs {
		if r.Phase == phase {
			return fmt.Sprintf("%.2fx\t%.2fx", r.Throughput, r.P50)
		}
	}
	return "—\t—"
}
