package main

import (
	"bytes"
	"slices"
	"strings"
	"testing"
)

const runA = `goos: linux
BenchmarkPublish/batch/raw-2     	   20000	     39157 ns/op	         9.702 cpu-µs/msg	     20000 msgs/s	    1660 B/op	      38 allocs/op
BenchmarkPublish/batch/acemq-2   	   20000	    123968 ns/op	        27.77 cpu-µs/msg	      9000 msgs/s	    7239 B/op	      98 allocs/op
BenchmarkPublish/batch/rawhdr-2   	   20000	    123968 ns/op	        26.00 cpu-µs/msg	      10000 msgs/s	    7239 B/op	      98 allocs/op
BenchmarkRPC/seq/raw-2     	    5000	    950780 ns/op	       400 p50-µs	      1052 msgs/s
BenchmarkRPC/seq/acemq-2   	    5000	   1146557 ns/op	       440 p50-µs	       872.2 msgs/s
--- FAIL: BenchmarkConsume/c1/acemq-2
BenchmarkPeers/send16/watermill-2        	     300	    268849 ns/op	        60.90 cpu-µs/msg	      3000 msgs/s
BenchmarkPeers/send16/acemq-2        	     300	    268849 ns/op	        60.90 cpu-µs/msg	      6000 msgs/s
`

const runB = `BenchmarkPublish/batch/acemq-2   	   20000	    123968 ns/op	      19000 msgs/s
BenchmarkPublish/batch/raw-2     	   20000	    123968 ns/op	      20000 msgs/s
BenchmarkPublish/batch/rawhdr-2     	   20000	    123968 ns/op	      19000 msgs/s
BenchmarkRPC/seq/raw-2     	    5000	    950780 ns/op	       400 p50-µs
BenchmarkRPC/seq/acemq-2   	    5000	   1146557 ns/op	       600 p50-µs
BenchmarkRPC/seq/acemq-2   	    5000	   1146557 ns/op	       600 p50-µs
`

func TestSummarise(t *testing.T) {
	var runs []run
	for _, s := range []string{runA, runB, runA} {
		r, err := parse(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		runs = append(runs, r)
	}
	pub, ok := summarise(runs, "Publish/batch", "raw", targets["Publish/batch"], true)
	if targets["Publish/batch"].base != "rawhdr" || targets["Consume/c1"].base != "raw" {
		t.Errorf("publishing is held to raw with the contract's headers, consuming to raw: %+v", targets)
	}
	if !ok {
		t.Fatal("no Publish/batch row")
	}
	// Per-run ratios 0.45, 0.95, 0.45: the median is 0.45, not the ratio
	// of the medians.
	if pub.ratio != 0.45 || pub.lo != 0.45 || pub.hi != 0.95 || pub.runs != 3 || pub.verdict != "MISSED" {
		t.Errorf("Publish/batch row = %+v", pub)
	}
	seq, _ := summarise(runs, "RPC/seq", "raw", targets["RPC/seq"], true)
	// Latency ratios 1.1, 1.5, 1.1: median 1.1, within 1.10.
	if seq.ratio != 1.1 || seq.verdict != "met" {
		t.Errorf("RPC/seq row = %+v", seq)
	}
	if _, ok := summarise(runs, "Consume/c1", "raw", targets["Consume/c1"], true); ok {
		t.Error("a workload with no results produced a row")
	}
	// Against raw with the headers: 0.90, 1.0, 0.90; client CPU 27.77
	// against 26.00 (runs without CPU figures left out) is within 10 %.
	same, _ := summarise(runs, "Publish/batch", "rawhdr", targets["Publish/batch"], true)
	if same.ratio != 0.9 || same.verdict != "MISSED" || same.cpuVerdict != "met" {
		t.Errorf("Publish/batch vs rawhdr row = %+v", same)
	}
	tight := targets["Publish/batch"]
	tight.bound = 0.4
	if r, _ := summarise(runs[:1], "Publish/batch", "raw", tight, true); r.verdict != "met" || r.cpuVerdict != "MISSED" {
		t.Errorf("27.77 µs against 9.70 is not within 10 %%: %+v", r)
	}
	ref, _ := summarise(runs, "Publish/batch", "rawhdr", targets["Publish/batch"], false)
	if ref.verdict != "(for reference)" || ref.cpuVerdict != "—" {
		t.Errorf("reference row = %+v", ref)
	}
	if ws := otherWorkloads(runs); len(ws) != 1 || ws[0] != "Peers/send16" {
		t.Errorf("workloads without a target: %v", ws)
	}
	peer, ok := summarise(runs, "Peers/send16", "watermill", target{metric: "msgs/s"}, false)
	if !ok || peer.ratio != 2 || peer.verdict != "(for reference)" {
		t.Errorf("acemq ÷ watermill row = %+v", peer)
	}
	var out bytes.Buffer
	printTable(&out, []row{pub, seq}, true)
	if !strings.Contains(out.String(), "| Publish/batch | raw | msgs/s | 20000 | 9000 | 0.450 | 0.45–0.95 | 3 | ≥ 0.95 | MISSED | 9.7 → 27.8 | 2.86 | MISSED |") {
		t.Errorf("table:\n%s", out.String())
	}
}

// Stream reads are target rows (the target 4): held to 0.95 of raw
// reading the same stream, with the CPU bound, and listed in the table's
// order; a stream run is not left among the workloads without a target.
func TestStreamReadsAreTargetRows(t *testing.T) {
	const streamRun = `BenchmarkStreamRead/prefetch10/raw-2     	   20000	     60000 ns/op	        40.00 cpu-µs/msg	     16000 msgs/s
BenchmarkStreamRead/prefetch10/acemq-2   	   20000	     64000 ns/op	        46.00 cpu-µs/msg	     15000 msgs/s
`
	r, err := parse(strings.NewReader(streamRun))
	if err != nil {
		t.Fatal(err)
	}
	runs := []run{r}
	for _, w := range []string{"StreamRead/prefetch10", "StreamRead/prefetch100"} {
		if tg, ok := targets[w]; !ok || tg.base != "raw" || tg.bound != 0.95 || tg.metric != "msgs/s" {
			t.Errorf("%s: target %+v, want 0.95 of raw in msgs/s", w, tg)
		}
	}
	row, ok := summarise(runs, "StreamRead/prefetch10", "raw", targets["StreamRead/prefetch10"], true)
	if !ok || row.ratio != 0.9375 || row.verdict != "MISSED" || row.cpuVerdict != "MISSED" {
		t.Errorf("StreamRead/prefetch10 row = %+v", row)
	}
	if ws := otherWorkloads(runs); len(ws) != 0 {
		t.Errorf("stream workloads left without a target: %v", ws)
	}
}

// TestSeqPublishIsATargetRow: one goroutine publishing with SendSeq is held
// to raw's sliding window writing the same headers, as the batch row is.
func TestSeqPublishIsATargetRow(t *testing.T) {
	tg, ok := targets["Publish/seq"]
	if !ok || tg.base != "rawhdr" || tg.bound != 0.95 || tg.metric != "msgs/s" || !slices.Contains(order, "Publish/seq") {
		t.Fatalf("Publish/seq: target %+v (in the table: %v), want 0.95 of rawhdr in msgs/s", tg, slices.Contains(order, "Publish/seq"))
	}
	r, err := parse(strings.NewReader(`BenchmarkPublish/seq/rawhdr-2   	   20000	     50000 ns/op	        20.00 cpu-µs/msg	     10000 msgs/s
BenchmarkPublish/seq/acemq-2   	   20000	     52000 ns/op	        21.00 cpu-µs/msg	      9600 msgs/s
`))
	if err != nil {
		t.Fatal(err)
	}
	row, ok := summarise([]run{r}, "Publish/seq", "rawhdr", tg, true)
	if !ok || row.ratio != 0.96 || row.verdict != "met" || row.cpuVerdict != "met" {
		t.Errorf("Publish/seq row = %+v", row)
	}
}

// TestPacedRowsAreTargetRows: every paced row (…at5k, …at2k, seq5k) is a
// target row held to the same side as the row it paces, listed in the
// table just after it, so that its CPU verdict counts; and every target
// is in the table.
func TestPacedRowsAreTargetRows(t *testing.T) {
	paced := map[string]string{
		"Publish/seq5k":             "Publish/seq",
		"Publish/send16at5k":        "Publish/send16",
		"Consume/c1at5k":            "Consume/c1",
		"Consume/c8at5k":            "Consume/c8",
		"RPC/c32at2k":               "RPC/c32",
		"StreamRead/prefetch10at5k": "StreamRead/prefetch10",
	}
	for p, of := range paced {
		tp, ok := targets[p]
		if !ok {
			t.Errorf("%s is not a target row", p)
			continue
		}
		if to := targets[of]; tp.base != to.base || tp.metric != "msgs/s" || tp.bound != 0.95 {
			t.Errorf("%s: target %+v, want 0.95 of %s in msgs/s as %s", p, tp, to.base, of)
		}
		if i, j := slices.Index(order, of), slices.Index(order, p); i < 0 || j != i+1 {
			t.Errorf("%s is at %d in the table, want just after %s (at %d)", p, j, of, i)
		}
	}
	for w := range targets {
		if !slices.Contains(order, w) {
			t.Errorf("target %s is not in the table's order", w)
		}
	}
	r, err := parse(strings.NewReader(`BenchmarkConsume/c8at5k/raw-2   	   10000	     200000 ns/op	        40.00 cpu-µs/msg	     5000 msgs/s
BenchmarkConsume/c8at5k/acemq-2   	   10000	     200000 ns/op	        45.00 cpu-µs/msg	      5000 msgs/s
`))
	if err != nil {
		t.Fatal(err)
	}
	row, ok := summarise([]run{r}, "Consume/c8at5k", "raw", targets["Consume/c8at5k"], true)
	if !ok || row.verdict != "met" || row.cpuVerdict != "MISSED" {
		t.Errorf("Consume/c8at5k row = %+v, want the pace met and CPU 1.125 missed", row)
	}
}

// A paced row compares client CPU at the same pace only in runs where both
// sides kept it: a run in which a side fell short of the rate is left out
// of the CPU figures (and counted), and a row no run held is not judged.
func TestPacedRowsHeldToThePace(t *testing.T) {
	parseAll := func(texts ...string) []run {
		var runs []run
		for _, s := range texts {
			r, err := parse(strings.NewReader(s))
			if err != nil {
				t.Fatal(err)
			}
			runs = append(runs, r)
		}
		return runs
	}
	held := `BenchmarkPublish/send16at5k/rawhdr-2   	   10000	     200000 ns/op	        40.00 cpu-µs/msg	     4999 msgs/s
BenchmarkPublish/send16at5k/acemq-2   	   10000	     200000 ns/op	        42.00 cpu-µs/msg	      4998 msgs/s
`
	short := `BenchmarkPublish/send16at5k/rawhdr-2   	   10000	     200000 ns/op	        40.00 cpu-µs/msg	     4300 msgs/s
BenchmarkPublish/send16at5k/acemq-2   	   10000	     200000 ns/op	        60.00 cpu-µs/msg	      4990 msgs/s
`
	tg := targets["Publish/send16at5k"]
	// With the short run, CPU would be 51 against 40 (1.28, missed); held
	// runs only, 42 against 40.
	r, ok := summarise(parseAll(held, short), "Publish/send16at5k", "rawhdr", tg, true)
	if !ok || r.offPace != 1 || r.cpuRaw != 40 || r.cpuAcemq != 42 || r.cpuVerdict != "met" {
		t.Errorf("one run held, one short: %+v, want the short run left out and CPU 42 against 40 met", r)
	}
	if got := runsCell(r); got != "2 (1 off pace)" {
		t.Errorf("runs column %q", got)
	}
	r, _ = summarise(parseAll(short, short), "Publish/send16at5k", "rawhdr", tg, true)
	if r.offPace != 2 || r.cpuVerdict != "pace not held" || r.cpuAcemq != 60 {
		t.Errorf("no run held: %+v, want the figures shown and no CPU verdict", r)
	}
	// An unpaced row is judged on every run, whatever its throughput.
	unpaced := func(s string) string { return strings.ReplaceAll(s, "send16at5k", "send16") }
	r, _ = summarise(parseAll(unpaced(held), unpaced(short)), "Publish/send16", "rawhdr", targets["Publish/send16"], true)
	if r.offPace != 0 || r.cpuVerdict != "MISSED" {
		t.Errorf("unpaced row: %+v, want every run counted (CPU 51 against 40 missed)", r)
	}
	for w := range paces {
		if _, ok := targets[w]; !ok {
			t.Errorf("paced row %s is not a target", w)
		}
	}
}
