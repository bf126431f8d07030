package main

import (
	"bufio"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"

	"github.com/acemq/acemq/internal/perf"
	_ "github.com/acemq/acemq/rabbitmq" // the filler connects to RabbitMQ
)

// Counting instructions: the client's work per message, measured with
// callgrind as the marginal count of instructions between two message
// counts, (I(hi) − I(lo)) / (hi − lo), so that start-up and set-up cancel
// out. Every side runs alone in its own process (the test binary of
// internal/perf, or of bench/peers, built once) with one benchmark side
// selected and a fixed message count, GOMAXPROCS=1 (the runtime's idle
// spinning is not counted) and GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off
// (preemption signals stop valgrind, and valgrind 3.19 does not know the
// RDTSCP instruction the runtime reads the clock with when the CPU has it). Only the client is under callgrind; the broker
// runs outside it, and the queues the consuming sides read are filled by
// this process (perf.ServeFiller), outside it too.

// countRow is one row of the instruction count: a benchmark of
// internal/perf (or of bench/peers) and the sides of it that are counted.
type countRow struct {
	Name  string // the benchmark's name without the side, as perfcompare prints it
	Bench string // the -test.bench filter of the benchmark, without the side
	Base  string // raw doing the same work as acemq, which the ratio is taken against
	// Refs are other sides counted for reference, reported against Base.
	Refs  []string
	Peers bool    // the benchmark is in bench/peers
	Bound float64 // the target: acemq ÷ Base instructions per message at most
}

// countRows are the rows of the instruction count, in the table's order.
var countRows = []countRow{
	{Name: "Publish/send16", Bench: `^BenchmarkPublish$/^send16$`, Base: "rawhdr", Refs: []string{"raw"}, Bound: 1.00},
	{Name: "Publish/batch", Bench: `^BenchmarkPublish$/^batch$`, Base: "rawhdr", Refs: []string{"rawhdrbatch"}, Bound: 1.00},
	{Name: "Publish/seq", Bench: `^BenchmarkPublish$/^seq$`, Base: "rawhdr", Bound: 1.00},
	{Name: "Consume/c1", Bench: `^BenchmarkConsume$/^c1$`, Base: "raw", Refs: []string{"rawenv"}, Bound: 0.90},
	{Name: "Consume/c8", Bench: `^BenchmarkConsume$/^c8$`, Base: "raw", Refs: []string{"rawenv"}, Bound: 0.90},
	{Name: "RPC/seq", Bench: `^BenchmarkRPC$/^seq$`, Base: "rawhdr", Bound: 1.00},
	{Name: "RPC/c32", Bench: `^BenchmarkRPC$/^c32$`, Base: "rawhdr", Bound: 1.00},
	{Name: "StreamRead/prefetch10", Bench: `^BenchmarkStreamRead$/^prefetch10$`, Base: "raw", Bound: 1.00},
	{Name: "StreamRead/prefetch100", Bench: `^BenchmarkStreamRead$/^prefetch100$`, Base: "raw", Bound: 1.00},
	{Name: "Peers/send16", Bench: `^BenchmarkPeers$/^send16$`, Base: "rawhdr", Refs: []string{"watermill"}, Peers: true, Bound: 1.00},
	{Name: "Peers/batch", Bench: `^BenchmarkPeers$/^batch$`, Base: "rawhdr", Refs: []string{"watermill"}, Peers: true, Bound: 1.00},
}

// subject is the side every row measures against its Base.
const subject = "acemq"

// sides are the sides a row counts: Base, acemq, then the references
// (with refs).
func (r countRow) sides(refs bool) []string {
	s := []string{r.Base, subject}
	if refs {
		s = append(s, r.Refs...)
	}
	return s
}

// parseTotals reads the total instruction count (Ir) of a callgrind output
// file: its "totals:" line, or its "summary:" line when it has none.
func parseTotals(r io.Reader) (uint64, error) {
	var summary string
	sc := bufio.NewScanner(r)
	sc.Buffer(make([]byte, 64*1024), 16*1024*1024)
	for sc.Scan() {
		line := sc.Text()
		switch {
		case strings.HasPrefix(line, "totals:"):
			return parseCount(line[len("totals:"):])
		case strings.HasPrefix(line, "summary:"):
			summary = line[len("summary:"):]
		}
	}
	if err := sc.Err(); err != nil {
		return 0, err
	}
	if summary == "" {
		return 0, errors.New("no totals: or summary: line (did the run finish?)")
	}
	return parseCount(summary)
}

// parseCount reads the first event count (Ir) of a totals or summary line.
func parseCount(s string) (uint64, error) {
	f := strings.Fields(s)
	if len(f) == 0 {
		return 0, errors.New("an empty totals line")
	}
	return strconv.ParseUint(f[0], 10, 64)
}

// marginal is instructions per message between two counts.
func marginal(lo, hi uint64, nlo, nhi int) float64 {
	return (float64(hi) - float64(lo)) / float64(nhi-nlo)
}

// counter runs one side of one benchmark under callgrind.
type counter struct {
	bin, peersBin string // the test binaries of internal/perf and bench/peers
	url           string // the broker
	filler        string // the Unix socket of the filler (perf.ServeFiller)
	out           string // where the callgrind outputs go
	gogc          string // GOGC of the counted process
	log           io.Writer
}

// count runs side of row under callgrind with n messages and returns the
// total instructions of the process.
func (c *counter) count(ctx context.Context, row countRow, side string, n, repeat int) (uint64, error) {
	bin := c.bin
	if row.Peers {
		bin = c.peersBin
	}
	if bin == "" {
		return 0, fmt.Errorf("%s: no test binary given for it", row.Name)
	}
	file := filepath.Join(c.out, fmt.Sprintf("callgrind.%s.%s.%d.r%d", strings.ReplaceAll(row.Name, "/", "-"), side, n, repeat))
	ctx, cancel := context.WithTimeout(ctx, 15*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, "valgrind", "--tool=callgrind", "--callgrind-out-file="+file,
		bin, "-test.run=^$", "-test.bench="+row.Bench+"/^"+side+"$", "-test.benchtime="+strconv.Itoa(n)+"x", "-test.count=1")
	cmd.Env = append(os.Environ(),
		"GODEBUG=asyncpreemptoff=1,cpu.rdtscp=off", "GOMAXPROCS=1", "GOGC="+c.gogc,
		perf.CountEnv+"=1", perf.FillerEnv+"="+c.filler,
		"ACEMQ_TEST_AMQP_URL="+c.url)
	start := time.Now()
	out, err := cmd.CombinedOutput()
	if err == nil && !regexp.MustCompile(`(?m)^Benchmark\S+/`+regexp.QuoteMeta(side)+`\S*\s+`+strconv.Itoa(n)+`\s`).Match(out) {
		err = errors.New("the benchmark did not report a run of that count")
	}
	if err != nil {
		_ = os.WriteFile(file+".log", out, 0o644)
		return 0, fmt.Errorf("%s/%s, %d messages: %v (output in %s.log)", row.Name, side, n, err, file)
	}
	f, err := os.Open(file)
	if err != nil {
		return 0, err
	}
	defer f.Close()
	total, err := parseTotals(f)
	if err != nil {
		return 0, fmt.Errorf("%s: %w", file, err)
	}
	fmt.Fprintf(c.log, "  %s/%s %d messages: %d instructions (%.0fs)\n", row.Name, side, n, total, time.Since(start).Seconds())
	return total, nil
}

// measurement is what the count found for one row: per side, the
// instructions per message of every repeat.
type measurement struct {
	Row     countRow
	PerMsg  map[string][]float64
	Repeats int
}

// ratios are acemq's (or side's) instructions per message over the base's,
// repeat by repeat.
func (m measurement) ratios(side string) []float64 {
	b, s := m.PerMsg[m.Row.Base], m.PerMsg[side]
	var out []float64
	for i := range min(len(b), len(s)) {
		if b[i] > 0 {
			out = append(out, s[i]/b[i])
		}
	}
	return out
}

// measure counts every side of row at nlo and nhi messages, repeats times,
// alternating which side goes first from one repeat to the next.
func (c *counter) measure(ctx context.Context, row countRow, nlo, nhi, repeats int, refs bool) (measurement, error) {
	m := measurement{Row: row, PerMsg: map[string][]float64{}, Repeats: repeats}
	for r := range repeats {
		sides := row.sides(refs)
		if r%2 == 1 {
			slices.Reverse(sides)
		}
		for _, side := range sides {
			lo, err := c.count(ctx, row, side, nlo, r+1)
			if err != nil {
				return m, err
			}
			hi, err := c.count(ctx, row, side, nhi, r+1)
			if err != nil {
				return m, err
			}
			m.PerMsg[side] = append(m.PerMsg[side], marginal(lo, hi, nlo, nhi))
		}
	}
	return m, nil
}

// countConfig is what the count and guard subcommands share.
type countConfig struct {
	bin, peersBin, url, out, gogc string
	nlo, nhi, repeats             int
}

// withCounter starts a filler on a Unix socket in cfg.out and runs f with
// a counter using it.
func withCounter(cfg countConfig, f func(*counter) error) error {
	if _, err := exec.LookPath("valgrind"); err != nil {
		return errors.New("valgrind is not installed (apt-get install valgrind)")
	}
	if cfg.nlo <= 0 || cfg.nhi <= cfg.nlo {
		return fmt.Errorf("the message counts must be 0 < lo < hi, not %d and %d", cfg.nlo, cfg.nhi)
	}
	if err := os.MkdirAll(cfg.out, 0o755); err != nil {
		return err
	}
	sock := filepath.Join(cfg.out, "filler.sock")
	_ = os.Remove(sock)
	ln, err := net.Listen("unix", sock)
	if err != nil {
		return err
	}
	defer ln.Close()
	go func() { _ = perf.ServeFiller(ln) }()
	return f(&counter{bin: cfg.bin, peersBin: cfg.peersBin, url: cfg.url, filler: sock, out: cfg.out, gogc: cfg.gogc, log: os.Stderr})
}

func (cfg *countConfig) flags(fs *flag.FlagSet, nlo, nhi, repeats int) {
	fs.StringVar(&cfg.bin, "bin", "", "the test binary of internal/perf (go test -c -o … ./internal/perf)")
	fs.StringVar(&cfg.peersBin, "peers-bin", "", "the test binary of bench/peers, for the Peers rows")
	fs.StringVar(&cfg.url, "url", envOr("ACEMQ_TEST_AMQP_URL", "amqp://guest:guest@127.0.0.1:5672/"), "the broker")
	fs.StringVar(&cfg.out, "o", "", "where the callgrind outputs go (default a new folder under /tmp)")
	fs.StringVar(&cfg.gogc, "gogc", "off", "GOGC of the counted processes: off counts the client's own work without the collector's, whose cycles fall at different points from run to run")
	fs.IntVar(&cfg.nlo, "lo", nlo, "the smaller message count")
	fs.IntVar(&cfg.nhi, "hi", nhi, "the larger message count")
	fs.IntVar(&cfg.repeats, "r", repeats, "repeats of every side")
}

func (cfg *countConfig) defaultOut() error {
	if cfg.out != "" {
		return nil
	}
	d, err := os.MkdirTemp("", "acemq-count-")
	cfg.out = d
	return err
}

func envOr(name, def string) string {
	if v := os.Getenv(name); v != "" {
		return v
	}
	return def
}

// countMain is `perfcompare count`: every row (or those -rows selects),
// printed as one table.
func countMain(args []string) int {
	fs := flag.NewFlagSet("perfcompare count", flag.ExitOnError)
	var cfg countConfig
	cfg.flags(fs, 2000, 4000, 3)
	rowsRE := fs.String("rows", ".", "a regular expression over the rows' names (Publish/send16, Consume/c1, …)")
	refs := fs.Bool("refs", true, "also count the reference sides (raw, rawenv, rawhdrbatch, watermill)")
	markdown := fs.Bool("markdown", false, "print a Markdown table")
	jsonOut := fs.String("json", "", "also write the measurements to this file, as JSON")
	_ = fs.Parse(args)
	re, err := regexp.Compile(*rowsRE)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfcompare count:", err)
		return 2
	}
	if err := cfg.defaultOut(); err != nil {
		fmt.Fprintln(os.Stderr, "perfcompare count:", err)
		return 1
	}
	var ms []measurement
	failed := false
	err = withCounter(cfg, func(c *counter) error {
		for _, row := range countRows {
			if !re.MatchString(row.Name) || (row.Peers && cfg.peersBin == "") {
				continue
			}
			fmt.Fprintf(os.Stderr, "counting %s (%d → %d messages, %d repeats)\n", row.Name, cfg.nlo, cfg.nhi, cfg.repeats)
			m, err := c.measure(context.Background(), row, cfg.nlo, cfg.nhi, cfg.repeats, *refs)
			if err != nil {
				// The other rows are still counted.
				fmt.Fprintln(os.Stderr, "perfcompare count:", err)
				failed = true
				continue
			}
			ms = append(ms, m)
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfcompare count:", err)
		return 1
	}
	fmt.Printf("instructions per message, marginal %d → %d messages, %d repeats; callgrind outputs in %s\n", cfg.nlo, cfg.nhi, cfg.repeats, cfg.out)
	printCountTable(os.Stdout, ms, *markdown)
	if *jsonOut != "" {
		if err := writeJSON(*jsonOut, countJSON(ms, cfg)); err != nil {
			fmt.Fprintln(os.Stderr, "perfcompare count:", err)
			return 1
		}
	}
	if failed {
		return 1
	}
	for _, m := range ms {
		if median(m.ratios(subject)) > m.Row.Bound {
			return 3
		}
	}
	return 0
}

// countLine is one line of the count's table.
type countLine struct {
	Row, Side, Base         string
	BasePerMsg, PerMsg      float64 // medians
	BaseLo, BaseHi          float64
	Lo, Hi                  float64
	Ratio, RatioLo, RatioHi float64
	Bound                   float64 // 0 on a reference line
	Verdict                 string
	Repeats                 int
	BaseSpread, SideSpread  float64
}

// spread is (max − min) / median of xs.
func spread(xs []float64) float64 {
	if len(xs) == 0 || median(xs) == 0 {
		return 0
	}
	return (slices.Max(xs) - slices.Min(xs)) / median(xs)
}

// countLines turns the measurements into the table's lines: acemq against
// the base, then every reference side against it.
func countLines(ms []measurement) []countLine {
	var out []countLine
	for _, m := range ms {
		for _, side := range append([]string{subject}, m.Row.Refs...) {
			ss, bs := m.PerMsg[side], m.PerMsg[m.Row.Base]
			rs := m.ratios(side)
			if len(ss) == 0 || len(bs) == 0 || len(rs) == 0 {
				continue
			}
			l := countLine{
				Row: m.Row.Name, Side: side, Base: m.Row.Base,
				BasePerMsg: median(bs), BaseLo: slices.Min(bs), BaseHi: slices.Max(bs),
				PerMsg: median(ss), Lo: slices.Min(ss), Hi: slices.Max(ss),
				Ratio: median(rs), RatioLo: slices.Min(rs), RatioHi: slices.Max(rs),
				Repeats: len(rs), BaseSpread: spread(bs), SideSpread: spread(ss),
				Verdict: "(for reference)",
			}
			if side == subject {
				l.Bound = m.Row.Bound
				l.Verdict = "met"
				if l.Ratio > l.Bound {
					l.Verdict = "MISSED"
				}
			}
			out = append(out, l)
		}
	}
	return out
}

func printCountTable(w io.Writer, ms []measurement, markdown bool) {
	head := []string{"row", "same-work side", "its instr/msg", "side", "instr/msg", "ratio", "ratio range", "repeats", "spread (same-work, side)", "target", "result"}
	var lines [][]string
	for _, l := range countLines(ms) {
		target := "—"
		if l.Bound > 0 {
			target = fmt.Sprintf("≤ %.2f", l.Bound)
		}
		lines = append(lines, []string{
			l.Row, l.Base, fmt.Sprintf("%.0f (%.0f–%.0f)", l.BasePerMsg, l.BaseLo, l.BaseHi),
			l.Side, fmt.Sprintf("%.0f (%.0f–%.0f)", l.PerMsg, l.Lo, l.Hi),
			fmt.Sprintf("%.3f", l.Ratio), fmt.Sprintf("%.3f–%.3f", l.RatioLo, l.RatioHi), strconv.Itoa(l.Repeats),
			fmt.Sprintf("%.1f %%, %.1f %%", 100*l.BaseSpread, 100*l.SideSpread), target, l.Verdict,
		})
	}
	writeTable(w, head, lines, markdown)
}

// writeTable prints head and lines as aligned columns or as Markdown.
func writeTable(w io.Writer, head []string, lines [][]string, markdown bool) {
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

// countResult is the JSON form of a count.
type countResult struct {
	Lo      int         `json:"lo"`
	Hi      int         `json:"hi"`
	Repeats int         `json:"repeats"`
	Lines   []countLine `json:"lines"`
}

func countJSON(ms []measurement, cfg countConfig) countResult {
	return countResult{Lo: cfg.nlo, Hi: cfg.nhi, Repeats: cfg.repeats, Lines: countLines(ms)}
}

func writeJSON(name string, v any) error {
	b, err := json.MarshalIndent(v, "", "  ")
	if err != nil {
		return err
	}
	return os.WriteFile(name, append(b, '\n'), 0o644)
}
