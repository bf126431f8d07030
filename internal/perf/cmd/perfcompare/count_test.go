package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

func TestParseTotals(t *testing.T) {
	const out = "version: 1\ncreator: callgrind-3.19.0\nevents: Ir\nfn=(1) main\n3 12\nsummary: 74662638\n\n\ntotals: 74662639\n"
	n, err := parseTotals(strings.NewReader(out))
	if err != nil || n != 74662639 {
		t.Errorf("parseTotals = %d, %v; want the totals: line, 74662639", n, err)
	}
	n, err = parseTotals(strings.NewReader("events: Ir\nsummary: 1234 5\n"))
	if err != nil || n != 1234 {
		t.Errorf("parseTotals without totals: = %d, %v; want the summary's Ir, 1234", n, err)
	}
	if _, err := parseTotals(strings.NewReader("events: Ir\nfn=(1) main\n")); err == nil {
		t.Error("an output cut short (no totals, no summary) was read as a count")
	}
}

func TestMarginal(t *testing.T) {
	// 100 M of set-up, then 50,000 a message: the set-up cancels.
	lo, hi := uint64(100e6+2000*50000), uint64(100e6+4000*50000)
	if got := marginal(lo, hi, 2000, 4000); got != 50000 {
		t.Errorf("marginal = %v, want 50000", got)
	}
}

func TestRatiosRepeatByRepeat(t *testing.T) {
	m := measurement{
		Row:    countRow{Name: "Consume/c1", Base: "raw", Bound: 0.90},
		PerMsg: map[string][]float64{"raw": {100, 110, 90}, "acemq": {120, 110, 99}},
	}
	got := m.ratios("acemq")
	want := []float64{1.2, 1.0, 1.1}
	if len(got) != len(want) {
		t.Fatalf("ratios = %v, want %v", got, want)
	}
	for i := range want {
		if d := got[i] - want[i]; d > 1e-9 || d < -1e-9 {
			t.Errorf("ratios = %v, want %v (each repeat's acemq over the same repeat's raw)", got, want)
		}
	}
	lines := countLines([]measurement{m})
	if len(lines) != 1 || lines[0].Ratio < 1.0999 || lines[0].Ratio > 1.1001 || lines[0].Verdict != "MISSED" {
		t.Errorf("countLines = %+v, want one line with the median ratio 1.1, missing the target 0.90", lines)
	}
}

func TestEveryCountRowIsDefined(t *testing.T) {
	seen := map[string]bool{}
	for _, r := range countRows {
		if seen[r.Name] {
			t.Errorf("row %s twice", r.Name)
		}
		seen[r.Name] = true
		if r.Base == "" || r.Bound <= 0 || !strings.HasPrefix(r.Bench, "^Benchmark") {
			t.Errorf("row %+v: a count row needs a same-work side, a target and a benchmark filter", r)
		}
		want := 1.00
		if strings.HasPrefix(r.Name, "Consume/") {
			want = 0.90
		}
		if r.Bound != want {
			t.Errorf("row %s: target %.2f, want %.2f", r.Name, r.Bound, want)
		}
	}
	for _, name := range []string{"Publish/send16", "Publish/batch", "Publish/seq", "Consume/c1", "Consume/c8", "RPC/seq", "RPC/c32", "StreamRead/prefetch10"} {
		if !seen[name] {
			t.Errorf("no count row %s", name)
		}
	}
}

var testRecord = record{
	Tolerance: 0.03,
	Rows: []recordRow{
		{Row: "Publish/send16", Base: "rawhdr", Ratio: 1.20},
		{Row: "Consume/c1", Base: "raw", Ratio: 1.08},
		{Row: "RPC/seq", Base: "rawhdr", Ratio: 1.15},
	},
}

func kinds(vs []verdict) map[string]string {
	out := map[string]string{}
	for _, v := range vs {
		out[v.Row] = v.Kind
	}
	return out
}

func TestGuardWithinTolerancePasses(t *testing.T) {
	// +2.9 %, −2.9 % and unchanged: all within 3 %.
	vs := judge(testRecord, map[string]float64{"Publish/send16": 1.2348, "Consume/c1": 1.0487, "RPC/seq": 1.15})
	for _, v := range vs {
		if v.Kind != withinTolerance || v.fails() {
			t.Errorf("%v: want ok", v)
		}
	}
	if report(&bytes.Buffer{}, vs) != 0 {
		t.Error("the guard failed with every row within tolerance")
	}
}

func TestGuardRegressionFails(t *testing.T) {
	vs := judge(testRecord, map[string]float64{"Publish/send16": 1.20, "Consume/c1": 1.12, "RPC/seq": 1.15})
	if k := kinds(vs); k["Consume/c1"] != regressed || k["Publish/send16"] != withinTolerance {
		t.Errorf("verdicts %v: want Consume/c1 (1.12 against 1.08, +3.7 %%) regressed, the others ok", k)
	}
	var out bytes.Buffer
	if report(&out, vs) == 0 {
		t.Error("the guard passed a regression")
	}
	// The message names the row and both ratios.
	if !strings.Contains(out.String(), "Consume/c1: REGRESSED") || !strings.Contains(out.String(), "1.120") || !strings.Contains(out.String(), "recorded 1.080") {
		t.Errorf("the report does not name the row and both ratios:\n%s", out.String())
	}
}

func TestGuardImprovementAsksForAnUpdate(t *testing.T) {
	vs := judge(testRecord, map[string]float64{"Publish/send16": 1.10, "Consume/c1": 1.08, "RPC/seq": 1.15})
	if k := kinds(vs); k["Publish/send16"] != improved {
		t.Errorf("verdicts %v: want Publish/send16 (1.10 against 1.20) improved", k)
	}
	var out bytes.Buffer
	if report(&out, vs) != 0 {
		t.Error("an improvement failed the guard")
	}
	if !strings.Contains(out.String(), "Publish/send16: IMPROVED") || !strings.Contains(out.String(), "update the record") {
		t.Errorf("the report does not ask for the record to be updated:\n%s", out.String())
	}
}

func TestGuardMissingRowFails(t *testing.T) {
	vs := judge(testRecord, map[string]float64{"Publish/send16": 1.20, "RPC/seq": 1.15})
	if k := kinds(vs); k["Consume/c1"] != missing {
		t.Errorf("verdicts %v: want Consume/c1 (recorded, not measured) missing", k)
	}
	var out bytes.Buffer
	if report(&out, vs) == 0 || !strings.Contains(out.String(), "Consume/c1: MISSING") {
		t.Errorf("a recorded row that was not measured did not fail the guard:\n%s", out.String())
	}
	// A measured row the record does not have fails too: it was never
	// given a baseline.
	vs = judge(testRecord, map[string]float64{"Publish/send16": 1.20, "Consume/c1": 1.08, "RPC/seq": 1.15, "RPC/c32": 1.3})
	if k := kinds(vs); k["RPC/c32"] != unrecorded || report(&bytes.Buffer{}, vs) == 0 {
		t.Errorf("verdicts %v: want RPC/c32 unrecorded, failing", k)
	}
}

// The checked-in record is one the guard can use: a tolerance, counts,
// rows perfcompare knows, each with its same-work side.
func TestCheckedInRecord(t *testing.T) {
	rec, err := readRecord(filepath.Join("..", "..", "testdata", "instructions.json"))
	if err != nil {
		t.Fatal(err)
	}
	if rec.Lo <= 0 || rec.Hi <= rec.Lo || rec.Repeats < 1 || rec.ToleranceWhy == "" {
		t.Errorf("record %+v: want counts lo < hi, repeats and the tolerance's reason", rec)
	}
	if len(rec.Rows) < 3 {
		t.Errorf("the record guards %d rows, want at least publishing, consuming and request/reply", len(rec.Rows))
	}
	for _, r := range rec.Rows {
		row, ok := rowNamed(r.Row)
		if !ok || row.Base != r.Base || r.Ratio <= 0 {
			t.Errorf("recorded row %+v: not a count row, or not against its same-work side %q", r, row.Base)
		}
	}
}

func TestReadRecordRejectsABadTolerance(t *testing.T) {
	name := filepath.Join(t.TempDir(), "r.json")
	if err := os.WriteFile(name, []byte(`{"tolerance": 0, "rows": []}`), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := readRecord(name); err == nil {
		t.Error("a record with no tolerance was accepted")
	}
}

func TestRecordRowCounts(t *testing.T) {
	if lo, hi := (recordRow{Row: "RPC/seq", Lo: 300, Hi: 600}).counts(1000, 3000); lo != 300 || hi != 600 {
		t.Errorf("a row's own counts = %d, %d; want 300, 600", lo, hi)
	}
	if lo, hi := (recordRow{Row: "Consume/c1"}).counts(1000, 3000); lo != 1000 || hi != 3000 {
		t.Errorf("a row without counts = %d, %d; want the record's, 1000, 3000", lo, hi)
	}
}

// guard -update writes nothing when a recorded row could not be measured:
// the record would lose the row and the guard stop watching it.
func TestGuardUpdateKeepsEveryRow(t *testing.T) {
	rec := record{Rows: []recordRow{{Row: "Publish/seq", Ratio: 1.1}, {Row: "RPC/seq", Ratio: 1.2, Lo: 300, Hi: 600}}}
	seq, _ := rowNamed("Publish/seq")
	rpc, _ := rowNamed("RPC/seq")
	m := func(row countRow, base, acemq float64) measurement {
		return measurement{Row: row, Repeats: 1, PerMsg: map[string][]float64{row.Base: {base}, subject: {acemq}}}
	}
	counts := map[string][2]int{"RPC/seq": {300, 600}}
	if _, err := updated(rec, []measurement{m(seq, 100, 105)}, counts); err == nil || !strings.Contains(err.Error(), "RPC/seq") {
		t.Fatalf("an update missing RPC/seq: %v", err)
	}
	got, err := updated(rec, []measurement{m(seq, 100, 105), m(rpc, 200, 220)}, counts)
	if err != nil {
		t.Fatal(err)
	}
	if len(got.Rows) != 2 || got.Rows[0].Ratio != 1.05 || got.Rows[1].Ratio != 1.1 || got.Rows[1].Lo != 300 || got.Rows[1].Hi != 600 {
		t.Fatalf("updated rows = %+v", got.Rows)
	}
}
