// Command perfcompare reads the output of several runs of the
// internal/perf benchmarks (one file per run, each run holding the raw and
// the acemq side of every workload) and prints one table: for each
// workload the median of the results of acemq and of the side it is held
// to (raw amqp091-go doing the same work: rawhdr for publishing and
// request/reply, raw for consuming), the median of the per-run ratios,
// their range, whether the target is met, and whether acemq's client CPU
// per message is within 10 % of that side's; then the same against the
// other sides for reference (raw with a bare body, the parts of the gap,
// peers such as watermill).
//
// Ratios are taken within a run (raw and acemq measured minutes apart on
// the same broker) and only then summarised, so a machine that is slower
// in one run than in another moves both sides together.
//
// Usage:
//
//	perfcompare run-1.txt run-2.txt ...
//	perfcompare count -bin perf.test [-peers-bin peers.test] [-lo 2000 -hi 4000 -r 3] [-rows RE]
//	perfcompare guard -bin perf.test -record internal/perf/testdata/instructions.json [-update]
//
// count measures the client's instructions per message with callgrind
// (valgrind --tool=callgrind), every side in its own process, as the
// marginal count between two message counts, and prints acemq's against
// raw's doing the same work, row by row. guard is the quick form CI runs
// as a regression guard: a few rows at small counts, compared with the
// ratios recorded in a file; it fails when a row's ratio has risen beyond
// the file's tolerance.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"io"
	"os"
	"regexp"
	"slices"
	"strconv"
	"strings"
)

// target is what a workload must reach.
type target struct {
	metric string  // "msgs/s" (higher is better) or "p50-µs" (lower is better)
	bound  float64 // ratio acemq/base: at least (msgs/s), at most (p50-µs)
	label  string
	// base is the side the target is measured against: raw doing the same
	// work as acemq. For publishing and request/reply that is rawhdr (raw
	// amqp091-go writing the contract's headers, UUID ids included); for
	// consuming it is raw, which reads the same messages (the queue is
	// filled through acemq for both).
	base string
}

// cpuBound is the most client CPU per message acemq may spend, as a
// multiple of the same-work reference's, on every target row.
const cpuBound = 1.10

// targets of the performance issue, by workload (benchmark name without
// the side).
var targets = map[string]target{
	"Publish/batch": {"msgs/s", 0.95, "≥ 0.95", "rawhdr"},
	// One goroutine with a sliding window on both sides (SendSeq).
	"Publish/seq": {"msgs/s", 0.95, "≥ 0.95", "rawhdr"},
	// The same at 5,000 messages a second on both sides: the throughput
	// only shows that acemq keeps the pace; the row is there for client
	// CPU per message at the same pace.
	"Publish/seq5k":  {"msgs/s", 0.95, "≥ 0.95", "rawhdr"},
	"Publish/send16": {"msgs/s", 0.95, "≥ 0.95", "rawhdr"},
	"Consume/c1":     {"msgs/s", 0.95, "≥ 0.95", "raw"},
	"Consume/c8":     {"msgs/s", 0.95, "≥ 0.95", "raw"},
	"RPC/seq":        {"p50-µs", 1.10, "≤ 1.10", "rawhdr"},
	"RPC/c32":        {"msgs/s", 0.95, "≥ 0.95", "rawhdr"},
	// Stream reads (target 4): raw consuming the same stream from its
	// first offset at the same prefetch.
	"StreamRead/prefetch10":  {"msgs/s", 0.95, "≥ 0.95", "raw"},
	"StreamRead/prefetch100": {"msgs/s", 0.95, "≥ 0.95", "raw"},
	// The other paced rows, as Publish/seq5k: both sides held to one pace
	// (…at5k: 5,000 messages a second; …at2k: 2,000 calls), for client CPU
	// per message at the same pace.
	"Publish/send16at5k":        {"msgs/s", 0.95, "≥ 0.95", "rawhdr"},
	"Consume/c1at5k":            {"msgs/s", 0.95, "≥ 0.95", "raw"},
	"Consume/c8at5k":            {"msgs/s", 0.95, "≥ 0.95", "raw"},
	"RPC/c32at2k":               {"msgs/s", 0.95, "≥ 0.95", "rawhdr"},
	"StreamRead/prefetch10at5k": {"msgs/s", 0.95, "≥ 0.95", "raw"},
}

// paces are the paced rows' rates (messages, or calls, a second). Their
// CPU ratio is a comparison at the same pace only in runs where both sides
// kept it: a run in which either side fell below heldPace of the rate
// (the machine could not send that fast) is left out of the row's CPU
// figures, and a row that no run held gets no CPU verdict.
var paces = map[string]float64{
	"Publish/seq5k":             5000,
	"Publish/send16at5k":        5000,
	"Consume/c1at5k":            5000,
	"Consume/c8at5k":            5000,
	"RPC/c32at2k":               2000,
	"StreamRead/prefetch10at5k": 5000,
}

// heldPace is the share of its rate a paced side must reach for its run to
// count as held to the pace.
const heldPace = 0.97

// references are the other sides a workload may have, printed for
// reference after its target row: raw with a bare body (the contract's
// cost), the parts of the gap (rawhdrbatch, driver; for request/reply
// asker and server, acemq's requester or responder against raw's other
// half; for consuming rawenv, raw reading the envelope by hand) and peers.
var references = []string{"raw", "rawhdr", "rawhdrbatch", "driver", "asker", "server", "rawenv", "watermill"}

// order is the order of the table's rows.
var order = []string{
	"Publish/batch", "Publish/seq", "Publish/seq5k", "Publish/send16", "Publish/send16at5k",
	"Consume/c1", "Consume/c1at5k", "Consume/c8", "Consume/c8at5k",
	"RPC/seq", "RPC/c32", "RPC/c32at2k",
	"StreamRead/prefetch10", "StreamRead/prefetch10at5k", "StreamRead/prefetch100",
}

// result is one benchmark line's metrics.
type result map[string]float64

// run is one file: workload → side → result.
type run map[string]map[string]result

var benchLine = regexp.MustCompile(`^Benchmark(\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

func parse(r io.Reader) (run, error) {
	out := run{}
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		name := m[1]
		i := strings.LastIndexByte(name, '/')
		if i < 0 {
			continue
		}
		workload, side := name[:i], name[i+1:]
		f := strings.Fields(m[2])
		res := result{}
		for j := 0; j+1 < len(f); j += 2 {
			v, err := strconv.ParseFloat(f[j], 64)
			if err != nil {
				continue
			}
			res[f[j+1]] = v
		}
		if out[workload] == nil {
			out[workload] = map[string]result{}
		}
		out[workload][side] = res
	}
	return out, sc.Err()
}

func median(xs []float64) float64 {
	if len(xs) == 0 {
		return 0
	}
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// row is one line of the table.
type row struct {
	workload, metric, vs, targetLabel string
	raw, acemq                        float64
	ratio, lo, hi                     float64
	cpuRaw, cpuAcemq                  float64
	runs                              int
	// offPace is how many runs of a paced row did not hold the pace on
	// one side or both; their CPU figures are left out.
	offPace int
	verdict string
	// cpuVerdict is met or MISSED against cpuBound on a target row, "—"
	// on a reference row or when a side reported no CPU.
	cpuVerdict string
}

// cpuRatio is acemq's client CPU per message over the base side's (0 when
// either is unknown).
func (r row) cpuRatio() float64 {
	if r.cpuRaw <= 0 || r.cpuAcemq <= 0 {
		return 0
	}
	return r.cpuAcemq / r.cpuRaw
}

func summarise(runs []run, workload, base string, t target, withTarget bool) (row, bool) {
	var raws, aces, ratios, cpuR, cpuA, offR, offA []float64
	pace := paces[workload]
	offPace := 0
	for _, r := range runs {
		sides := r[workload]
		rb, okb := sides[base]
		ra, oka := sides["acemq"]
		if !okb || !oka || rb[t.metric] == 0 || ra[t.metric] == 0 {
			continue
		}
		raws = append(raws, rb[t.metric])
		aces = append(aces, ra[t.metric])
		ratios = append(ratios, ra[t.metric]/rb[t.metric])
		if rb["cpu-µs/msg"] > 0 && ra["cpu-µs/msg"] > 0 {
			if pace > 0 && (rb["msgs/s"] < heldPace*pace || ra["msgs/s"] < heldPace*pace) {
				offPace++
				offR = append(offR, rb["cpu-µs/msg"])
				offA = append(offA, ra["cpu-µs/msg"])
				continue
			}
			cpuR = append(cpuR, rb["cpu-µs/msg"])
			cpuA = append(cpuA, ra["cpu-µs/msg"])
		}
	}
	if len(ratios) == 0 {
		return row{}, false
	}
	rw := row{
		workload: workload, metric: t.metric, vs: base,
		raw: median(raws), acemq: median(aces),
		ratio: median(ratios), lo: slices.Min(ratios), hi: slices.Max(ratios),
		cpuRaw: median(cpuR), cpuAcemq: median(cpuA),
		runs: len(ratios), offPace: offPace, targetLabel: "—", verdict: "(for reference)", cpuVerdict: "—",
	}
	if len(cpuR) == 0 && len(offR) > 0 {
		// No run held the pace: the figures are shown, unjudged.
		rw.cpuRaw, rw.cpuAcemq = median(offR), median(offA)
	}
	if withTarget {
		rw.targetLabel = t.label
		met := rw.ratio >= t.bound
		if t.metric == "p50-µs" {
			met = rw.ratio <= t.bound
		}
		rw.verdict = "met"
		if !met {
			rw.verdict = "MISSED"
		}
		switch c := rw.cpuRatio(); {
		case len(cpuR) == 0 && len(offR) > 0:
			rw.cpuVerdict = "pace not held"
		case c > cpuBound:
			rw.cpuVerdict = "MISSED"
		case c > 0:
			rw.cpuVerdict = "met"
		}
	}
	return rw, true
}

func main() {
	if len(os.Args) > 1 {
		switch os.Args[1] {
		case "count":
			os.Exit(countMain(os.Args[2:]))
		case "guard":
			os.Exit(guardMain(os.Args[2:]))
		}
	}
	markdown := flag.Bool("markdown", false, "print a Markdown table")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: perfcompare [-markdown] run-1.txt run-2.txt ...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	var runs []run
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "perfcompare:", err)
			os.Exit(1)
		}
		r, err := parse(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "perfcompare: reading %s: %v\n", name, err)
			os.Exit(1)
		}
		runs = append(runs, r)
	}
	var rows []row
	for _, w := range order {
		t := targets[w]
		if rw, ok := summarise(runs, w, t.base, t, true); ok {
			rows = append(rows, rw)
		}
		for _, base := range references {
			if base == t.base {
				continue
			}
			if rw, ok := summarise(runs, w, base, t, false); ok {
				rows = append(rows, rw)
			}
		}
	}
	// Workloads without a target (the peer suite's, bench/peers) follow,
	// for reference, against every other side they have.
	for _, w := range otherWorkloads(runs) {
		t := target{metric: "msgs/s"}
		for _, base := range references {
			if rw, ok := summarise(runs, w, base, t, false); ok {
				rows = append(rows, rw)
			}
		}
	}
	if len(rows) == 0 {
		fmt.Fprintln(os.Stderr, "perfcompare: no pair of raw and acemq results found")
		os.Exit(1)
	}
	printTable(os.Stdout, rows, *markdown)
	for _, rw := range rows {
		if rw.verdict == "MISSED" || rw.cpuVerdict == "MISSED" {
			os.Exit(3)
		}
	}
}

// otherWorkloads are the workloads in runs that have no target, sorted.
func otherWorkloads(runs []run) []string {
	var ws []string
	for _, r := range runs {
		for w := range r {
			if _, ok := targets[w]; !ok && !slices.Contains(ws, w) {
				ws = append(ws, w)
			}
		}
	}
	slices.Sort(ws)
	return ws
}

// runsCell is the table's runs column: how many runs, and how many of a
// paced row's did not hold the pace.
func runsCell(r row) string {
	if r.offPace > 0 {
		return fmt.Sprintf("%d (%d off pace)", r.runs, r.offPace)
	}
	return strconv.Itoa(r.runs)
}

func unit(metric string) string {
	if metric == "p50-µs" {
		return "p50 µs"
	}
	return "msgs/s"
}

func printTable(w io.Writer, rows []row, markdown bool) {
	head := []string{"workload", "vs", "metric", "vs side", "acemq", "ratio", "range", "runs", "target", "result", "client CPU µs/msg vs→acemq", "CPU ratio", "CPU ≤ 1.10"}
	var lines [][]string
	for _, r := range rows {
		lines = append(lines, []string{
			r.workload, r.vs, unit(r.metric),
			fmt.Sprintf("%.0f", r.raw), fmt.Sprintf("%.0f", r.acemq),
			fmt.Sprintf("%.3f", r.ratio), fmt.Sprintf("%.2f–%.2f", r.lo, r.hi),
			runsCell(r), r.targetLabel, r.verdict,
			fmt.Sprintf("%.1f → %.1f", r.cpuRaw, r.cpuAcemq),
			fmt.Sprintf("%.2f", r.cpuRatio()), r.cpuVerdict,
		})
	}
	if markdown {
		fmt.Fprintln(w, "| "+strings.Join(head, " | ")+" |")
		fmt.Fprintln(w, "|"+strings.Repeat("---|", len(head)))
		for _, l := range lines {
			fmt.Fprintln(w, "| "+strings.Join(l, " | ")+" |")
		}
		return
	}
	width := make([]int, len(head))
	for i, h := range head {
		width[i] = len([]rune(h))
	}
	for _, l := range lines {
		for i, c := range l {
			width[i] = max(width[i], len([]rune(c)))
		}
	}
	pr := func(cells []string) {
		var b strings.Builder
		for i, c := range cells {
			b.WriteString(c)
			if i < len(cells)-1 {
				b.WriteString(strings.Repeat(" ", width[i]-len([]rune(c))+2))
			}
		}
		fmt.Fprintln(w, b.String())
	}
	pr(head)
	for _, l := range lines {
		pr(l)
	}
}
