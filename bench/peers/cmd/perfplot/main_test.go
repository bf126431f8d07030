package main

import (
	"image/png"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

const runA = `goos: linux
BenchmarkScaleConsumers/n=1/raw-2     	       1	  15253008 ns/op	         3.000 goroutines/consumer	      9320 heap-B/consumer
BenchmarkScaleConsumers/n=100/raw-2   	       1	  15253008 ns/op	         3.000 goroutines/consumer	      4000 heap-B/consumer
BenchmarkScaleConsumers/n=1/acemq-2   	       1	  13129974 ns/op	         2.000 goroutines/consumer	      5816 heap-B/consumer
BenchmarkScaleSenders/n=4/acemq-2   	    1000	    170366 ns/op	      5870 msgs/s
BenchmarkPeers/c1/raw-2                  	    3000	     26958 ns/op	     37097 msgs/s
`

const runB = `BenchmarkScaleConsumers/n=1/raw-2     	       1	  15253008 ns/op	         3.000 goroutines/consumer	      9000 heap-B/consumer
BenchmarkScaleConsumers/n=1/raw-2     	       1	  15253008 ns/op	         3.000 goroutines/consumer	      1000 heap-B/consumer
`

func TestCurvesAreMediansPerSide(t *testing.T) {
	var points []point
	for _, s := range []string{runA, runB} {
		ps, err := parse(strings.NewReader(s))
		if err != nil {
			t.Fatal(err)
		}
		points = append(points, ps...)
	}
	if len(points) != 6 {
		t.Fatalf("parsed %d scaling points, want 6 (BenchmarkPeers is not one)", len(points))
	}
	cs := curves(points, "ScaleConsumers", "heap-B/consumer")
	if len(cs) != 2 || cs[0].side != "raw" || cs[1].side != "acemq" {
		t.Fatalf("curves %+v", cs)
	}
	raw := cs[0]
	// n=1: 9320, 9000, 1000 → median 9000, range 1000–9320; n=100: 4000.
	if len(raw.ns) != 2 || raw.ns[0] != 1 || raw.values[0] != 9000 || raw.lo[0] != 1000 || raw.hi[0] != 9320 || raw.values[1] != 4000 {
		t.Errorf("raw curve %+v", raw)
	}
	dir := t.TempDir()
	ok, err := drawChart(dir, charts[0], cs)
	if !ok || err != nil {
		t.Fatalf("drawChart: %v, %v", ok, err)
	}
	f, err := os.Open(filepath.Join(dir, charts[0].file))
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	img, err := png.Decode(f)
	if err != nil {
		t.Fatalf("not a PNG: %v", err)
	}
	if b := img.Bounds(); b.Dx() < 300 || b.Dy() < 200 {
		t.Errorf("a %v picture", b)
	}
	if ok, _ := drawChart(dir, charts[3], curves(points, "ScaleHandlers", "msgs/s")); ok {
		t.Error("drew a chart with no points")
	}
}
