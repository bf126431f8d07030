// Command perfplot draws the scaling curves of docs/performance.md from the
// output of the bench/peers scaling benchmarks (go test -bench 'Scale'),
// one file per run: for each point the median over the runs, one line per
// side, written as PNG files.
//
// Usage:
//
//	perfplot -o ../../docs run-1.txt run-2.txt ...
//
// It writes scale-consumers-heap.png and scale-consumers-goroutines.png
// (per consumer, against the number of consumers on one connection),
// scale-senders.png (confirmed publishes a second against the goroutines
// sending) and scale-handlers.png (messages consumed a second against the
// handlers), and prints the medians it drew as a Markdown table.
package main

import (
	"bufio"
	"flag"
	"fmt"
	"image/color"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"slices"
	"strconv"
	"strings"

	"gonum.org/v1/plot"
	"gonum.org/v1/plot/plotter"
	"gonum.org/v1/plot/vg"
	"gonum.org/v1/plot/vg/draw"
)

// point is one benchmark result: group (ScaleSenders), n, side, metrics.
type point struct {
	group, side string
	n           int
	metrics     map[string]float64
}

var benchLine = regexp.MustCompile(`^Benchmark(Scale\w+)/n=(\d+)/(\S+?)(?:-\d+)?\s+\d+\s+(.*)$`)

// parse reads the scaling results of one run.
func parse(r io.Reader) ([]point, error) {
	var out []point
	sc := bufio.NewScanner(r)
	for sc.Scan() {
		m := benchLine.FindStringSubmatch(sc.Text())
		if m == nil {
			continue
		}
		n, _ := strconv.Atoi(m[2])
		p := point{group: m[1], n: n, side: m[3], metrics: map[string]float64{}}
		f := strings.Fields(m[4])
		for j := 0; j+1 < len(f); j += 2 {
			if v, err := strconv.ParseFloat(f[j], 64); err == nil {
				p.metrics[f[j+1]] = v
			}
		}
		out = append(out, p)
	}
	return out, sc.Err()
}

func median(xs []float64) float64 {
	s := slices.Clone(xs)
	slices.Sort(s)
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

// curve is one line: a side's medians of a metric against n.
type curve struct {
	side   string
	ns     []int
	values []float64
	lo, hi []float64 // the range over the runs
}

// curves gathers, for group and metric, one curve per side, in the order
// the sides first appear.
func curves(points []point, group, metric string) []curve {
	type key struct {
		side string
		n    int
	}
	vals := map[key][]float64{}
	var sides []string
	for _, p := range points {
		v, ok := p.metrics[metric]
		if p.group != group || !ok {
			continue
		}
		if !slices.Contains(sides, p.side) {
			sides = append(sides, p.side)
		}
		vals[key{p.side, p.n}] = append(vals[key{p.side, p.n}], v)
	}
	var out []curve
	for _, s := range sides {
		c := curve{side: s}
		for k := range vals {
			if k.side == s && !slices.Contains(c.ns, k.n) {
				c.ns = append(c.ns, k.n)
			}
		}
		slices.Sort(c.ns)
		for _, n := range c.ns {
			xs := vals[key{s, n}]
			c.values = append(c.values, median(xs))
			c.lo = append(c.lo, slices.Min(xs))
			c.hi = append(c.hi, slices.Max(xs))
		}
		out = append(out, c)
	}
	return out
}

// chart is one picture.
type chart struct {
	file, group, metric, title, xLabel, yLabel string
}

var charts = []chart{
	{"scale-consumers-heap.png", "ScaleConsumers", "heap-B/consumer", "Heap per idle consumer, one connection", "consumers on the connection", "heap bytes per consumer"},
	{"scale-consumers-goroutines.png", "ScaleConsumers", "goroutines/consumer", "Goroutines per idle consumer, one connection", "consumers on the connection", "goroutines per consumer"},
	{"scale-senders.png", "ScaleSenders", "msgs/s", "Confirmed publishes, one connection, quorum queue", "goroutines calling Send", "messages per second"},
	{"scale-handlers.png", "ScaleHandlers", "msgs/s", "Consume with manual acks, prefetch 200, quorum queue", "handlers (concurrency)", "messages per second"},
}

var palette = map[string]color.Color{
	"acemq":        color.RGBA{R: 0x1f, G: 0x77, B: 0xb4, A: 0xff},
	"acemq-memory": color.RGBA{R: 0x2c, G: 0xa0, B: 0x2c, A: 0xff},
	"raw":          color.RGBA{R: 0xd6, G: 0x27, B: 0x28, A: 0xff},
	"rawhdr":       color.RGBA{R: 0xff, G: 0x7f, B: 0x0e, A: 0xff},
}

// legendName says what a side is.
var legendName = map[string]string{
	"acemq":        "acemq (RabbitMQ)",
	"acemq-memory": "acemq (memory://)",
	"raw":          "raw amqp091-go",
	"rawhdr":       "raw amqp091-go, the contract's headers",
}

// draw writes ch's picture into dir; false when there is nothing to draw.
func drawChart(dir string, ch chart, cs []curve) (bool, error) {
	if len(cs) == 0 {
		return false, nil
	}
	p := plot.New()
	p.Title.Text = ch.title
	p.X.Label.Text = ch.xLabel
	p.Y.Label.Text = ch.yLabel
	p.Title.Padding = vg.Points(10)
	p.X.Scale = plot.LogScale{}
	var ticks []plot.Tick
	for _, c := range cs {
		for _, n := range c.ns {
			if !slices.ContainsFunc(ticks, func(t plot.Tick) bool { return t.Value == float64(n) }) {
				ticks = append(ticks, plot.Tick{Value: float64(n), Label: strconv.Itoa(n)})
			}
		}
	}
	p.X.Tick.Marker = plot.ConstantTicks(ticks)
	p.X.Padding = vg.Points(12)
	p.Y.Min = 0
	p.Y.Tick.Marker = plainTicks{}
	p.Add(plotter.NewGrid())
	// The legend sits in the headroom above the highest range.
	p.Legend.Top = true
	p.Legend.Left = true
	p.Legend.XOffs = vg.Points(8)
	for i, c := range cs {
		xys := make(plotter.XYs, len(c.ns))
		errs := make(plotter.YErrors, len(c.ns))
		for j := range c.ns {
			xys[j] = plotter.XY{X: float64(c.ns[j]), Y: c.values[j]}
			errs[j] = struct{ Low, High float64 }{c.values[j] - c.lo[j], c.hi[j] - c.values[j]}
			p.Y.Max = max(p.Y.Max, c.hi[j]*(1.2+0.12*float64(len(cs))))
		}
		line, points, err := plotter.NewLinePoints(xys)
		if err != nil {
			return false, err
		}
		col, ok := palette[c.side]
		if !ok {
			col = plotutilColor(i)
		}
		line.Color, points.Color = col, col
		line.Width = vg.Points(1.5)
		points.Shape = draw.CircleGlyph{}
		bars, err := plotter.NewYErrorBars(struct {
			plotter.XYs
			plotter.YErrors
		}{xys, errs})
		if err != nil {
			return false, err
		}
		bars.Color = col
		p.Add(line, points, bars)
		name := legendName[c.side]
		if name == "" {
			name = c.side
		}
		p.Legend.Add(name, line, points)
	}
	return true, p.Save(6*vg.Inch, 3.6*vg.Inch, filepath.Join(dir, ch.file))
}

// plainTicks are the default ticks labelled without trailing zeros
// (25000, not 25000.00).
type plainTicks struct{}

func (plainTicks) Ticks(lo, hi float64) []plot.Tick {
	ts := plot.DefaultTicks{}.Ticks(lo, hi)
	for i := range ts {
		if ts[i].Label != "" {
			ts[i].Label = strconv.FormatFloat(ts[i].Value, 'f', -1, 64)
		}
	}
	return ts
}

func plotutilColor(i int) color.Color {
	return []color.Color{color.Black, color.RGBA{R: 0x94, G: 0x67, B: 0xbd, A: 0xff}, color.RGBA{R: 0x8c, G: 0x56, B: 0x4b, A: 0xff}}[i%3]
}

func main() {
	dir := flag.String("o", ".", "folder to write the PNG files into")
	flag.Usage = func() {
		fmt.Fprintln(os.Stderr, "usage: perfplot [-o DIR] run-1.txt run-2.txt ...")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() == 0 {
		flag.Usage()
		os.Exit(2)
	}
	var points []point
	for _, name := range flag.Args() {
		f, err := os.Open(name)
		if err != nil {
			fmt.Fprintln(os.Stderr, "perfplot:", err)
			os.Exit(1)
		}
		ps, err := parse(f)
		f.Close()
		if err != nil {
			fmt.Fprintf(os.Stderr, "perfplot: reading %s: %v\n", name, err)
			os.Exit(1)
		}
		points = append(points, ps...)
	}
	drawn := 0
	for _, ch := range charts {
		cs := curves(points, ch.group, ch.metric)
		ok, err := drawChart(*dir, ch, cs)
		if err != nil {
			fmt.Fprintf(os.Stderr, "perfplot: %s: %v\n", ch.file, err)
			os.Exit(1)
		}
		if ok {
			drawn++
			printTable(os.Stdout, ch, cs)
		}
	}
	if drawn == 0 {
		fmt.Fprintln(os.Stderr, "perfplot: no scaling results found")
		os.Exit(1)
	}
}

// printTable prints ch's medians (and ranges) as Markdown.
func printTable(w io.Writer, ch chart, cs []curve) {
	var ns []int
	for _, c := range cs {
		for _, n := range c.ns {
			if !slices.Contains(ns, n) {
				ns = append(ns, n)
			}
		}
	}
	slices.Sort(ns)
	fmt.Fprintf(w, "\n%s (%s), median (range):\n\n| %s |", ch.title, ch.metric, ch.xLabel)
	for _, c := range cs {
		fmt.Fprintf(w, " %s |", c.side)
	}
	fmt.Fprintf(w, "\n|---|%s\n", strings.Repeat("---|", len(cs)))
	for _, n := range ns {
		fmt.Fprintf(w, "| %d |", n)
		for _, c := range cs {
			if j := slices.Index(c.ns, n); j >= 0 {
				fmt.Fprintf(w, " %s (%s–%s) |", num(c.values[j]), num(c.lo[j]), num(c.hi[j]))
			} else {
				fmt.Fprint(w, " — |")
			}
		}
		fmt.Fprintln(w)
	}
}

func num(v float64) string {
	if v >= 100 || v <= -100 {
		return strconv.FormatFloat(v, 'f', 0, 64)
	}
	return strconv.FormatFloat(v, 'f', 2, 64)
}
