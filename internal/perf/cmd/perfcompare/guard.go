package main

import (
	"context"
	"encoding/json"
	"flag"
	"fmt"
	"io"
	"os"
	"slices"
	"strings"
	"time"
)

// The regression guard: a few rows counted at small message counts, their
// acemq ÷ same-work-raw instruction ratios compared with those recorded in
// a file (internal/perf/testdata/instructions.json). A ratio, not a count,
// is recorded: both sides run the same amqp091-go, Go runtime and broker,
// so an upgrade of any of them moves both counts and mostly cancels out,
// while work acemq adds per message moves only acemq's.

// record is the guard's file.
type record struct {
	// About says what the file is and how to update it.
	About string `json:"about"`
	// Lo and Hi are the message counts the marginal is taken between, and
	// Repeats how many times each side is counted (the guard compares the
	// median ratio).
	Lo      int `json:"lo"`
	Hi      int `json:"hi"`
	Repeats int `json:"repeats"`
	// Tolerance is how far, as a share of the recorded ratio, a measured
	// ratio may move before the guard calls it a regression (above) or an
	// improvement to record (below).
	Tolerance float64 `json:"tolerance"`
	// ToleranceWhy justifies Tolerance from the measured spread.
	ToleranceWhy string      `json:"tolerance_why"`
	Rows         []recordRow `json:"rows"`
}

// recordRow is one row's recorded figures.
type recordRow struct {
	Row   string  `json:"row"`
	Base  string  `json:"base"`
	Ratio float64 `json:"ratio"`
	// The instructions per message behind the ratio, for the reader: the
	// guard compares only the ratio.
	BasePerMsg  float64 `json:"base_instructions_per_message"`
	AcemqPerMsg float64 `json:"acemq_instructions_per_message"`
	// RatioRange is the lowest and highest ratio of the repeats recorded.
	RatioRange [2]float64 `json:"ratio_range"`
	// Lo and Hi, when set, are this row's message counts instead of the
	// record's (a request/reply call costs several times a publish, so
	// fewer calls give as many instructions to compare).
	Lo int `json:"lo,omitempty"`
	Hi int `json:"hi,omitempty"`
}

// counts are the message counts of row r: its own, or the default ones.
func (r recordRow) counts(lo, hi int) (int, int) {
	if r.Lo > 0 && r.Hi > r.Lo {
		return r.Lo, r.Hi
	}
	return lo, hi
}

// verdict kinds.
const (
	withinTolerance = "ok"
	regressed       = "REGRESSED"
	improved        = "IMPROVED"
	missing         = "MISSING"
	unrecorded      = "UNRECORDED"
)

// verdict is the guard's finding on one row.
type verdict struct {
	Row                string
	Kind               string
	Recorded, Measured float64
}

// fails reports whether the verdict fails the guard: a regression, a
// recorded row that was not measured, or a measured row with no record.
func (v verdict) fails() bool {
	return v.Kind == regressed || v.Kind == missing || v.Kind == unrecorded
}

func (v verdict) String() string {
	switch v.Kind {
	case regressed:
		return fmt.Sprintf("%s: REGRESSED: acemq ÷ raw instructions per message is %.3f, recorded %.3f (%+.1f %%, beyond the tolerance)",
			v.Row, v.Measured, v.Recorded, 100*(v.Measured/v.Recorded-1))
	case improved:
		return fmt.Sprintf("%s: IMPROVED: acemq ÷ raw instructions per message is %.3f, recorded %.3f (%+.1f %%): update the record (scripts/perf-guard -u) so that the gain is kept",
			v.Row, v.Measured, v.Recorded, 100*(v.Measured/v.Recorded-1))
	case missing:
		return fmt.Sprintf("%s: MISSING: recorded %.3f but not measured", v.Row, v.Recorded)
	case unrecorded:
		return fmt.Sprintf("%s: UNRECORDED: measured %.3f but the record has no such row", v.Row, v.Measured)
	}
	return fmt.Sprintf("%s: ok: %.3f, recorded %.3f (%+.1f %%)", v.Row, v.Measured, v.Recorded, 100*(v.Measured/v.Recorded-1))
}

// judge compares measured ratios (row → acemq ÷ base instructions per
// message) with the record, row by row in the record's order, then the
// measured rows it does not have.
func judge(rec record, measured map[string]float64) []verdict {
	var out []verdict
	seen := map[string]bool{}
	for _, r := range rec.Rows {
		seen[r.Row] = true
		m, ok := measured[r.Row]
		v := verdict{Row: r.Row, Recorded: r.Ratio, Measured: m, Kind: withinTolerance}
		switch {
		case !ok || m <= 0:
			v.Kind = missing
		case m > r.Ratio*(1+rec.Tolerance):
			v.Kind = regressed
		case m < r.Ratio*(1-rec.Tolerance):
			v.Kind = improved
		}
		out = append(out, v)
	}
	var extra []string
	for row := range measured {
		if !seen[row] {
			extra = append(extra, row)
		}
	}
	slices.Sort(extra)
	for _, row := range extra {
		out = append(out, verdict{Row: row, Kind: unrecorded, Measured: measured[row]})
	}
	return out
}

// report prints the verdicts and returns the guard's exit status: 1 when
// any fails, else 0.
func report(w io.Writer, vs []verdict) int {
	status := 0
	for _, v := range vs {
		fmt.Fprintln(w, v)
		if v.fails() {
			status = 1
		}
	}
	return status
}

func readRecord(name string) (record, error) {
	var rec record
	b, err := os.ReadFile(name)
	if err != nil {
		return rec, err
	}
	if err := json.Unmarshal(b, &rec); err != nil {
		return rec, fmt.Errorf("%s: %w", name, err)
	}
	if rec.Tolerance <= 0 || rec.Tolerance >= 1 {
		return rec, fmt.Errorf("%s: the tolerance must be between 0 and 1, not %v", name, rec.Tolerance)
	}
	return rec, nil
}

// rowNamed is the count row of that name.
func rowNamed(name string) (countRow, bool) {
	for _, r := range countRows {
		if r.Name == name {
			return r, true
		}
	}
	return countRow{}, false
}

// guardMain is `perfcompare guard`: the rows of the record counted at its
// counts and compared with it; with -update, the record rewritten with
// what was measured.
func guardMain(args []string) int {
	fs := flag.NewFlagSet("perfcompare guard", flag.ExitOnError)
	var cfg countConfig
	cfg.flags(fs, 0, 0, 0)
	recordFile := fs.String("record", "internal/perf/testdata/instructions.json", "the recorded ratios")
	update := fs.Bool("update", false, "write what was measured to the record instead of comparing")
	_ = fs.Parse(args)
	rec, err := readRecord(*recordFile)
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfcompare guard:", err)
		return 2
	}
	// The record's counts unless the flags say otherwise.
	if cfg.nlo == 0 {
		cfg.nlo = rec.Lo
	}
	if cfg.nhi == 0 {
		cfg.nhi = rec.Hi
	}
	if cfg.repeats == 0 {
		cfg.repeats = max(rec.Repeats, 1)
	}
	if err := cfg.defaultOut(); err != nil {
		fmt.Fprintln(os.Stderr, "perfcompare guard:", err)
		return 2
	}
	start := time.Now()
	measured := map[string]float64{}
	counts := map[string][2]int{} // the rows' own counts, kept on -update
	var ms []measurement
	err = withCounter(cfg, func(c *counter) error {
		for _, r := range rec.Rows {
			row, ok := rowNamed(r.Row)
			if !ok {
				fmt.Fprintf(os.Stderr, "perfcompare guard: the record's row %s is not a row perfcompare counts\n", r.Row)
				continue
			}
			lo, hi := r.counts(cfg.nlo, cfg.nhi)
			fmt.Fprintf(os.Stderr, "counting %s (%d → %d messages, %d repeats)\n", row.Name, lo, hi, cfg.repeats)
			m, err := c.measure(context.Background(), row, lo, hi, cfg.repeats, false)
			if err != nil {
				// A row that could not be measured is reported MISSING.
				fmt.Fprintln(os.Stderr, "perfcompare guard:", err)
				continue
			}
			ms = append(ms, m)
			counts[row.Name] = [2]int{r.Lo, r.Hi}
			measured[row.Name] = median(m.ratios(subject))
		}
		return nil
	})
	if err != nil {
		fmt.Fprintln(os.Stderr, "perfcompare guard:", err)
		return 2
	}
	fmt.Printf("instruction guard: marginal %d → %d messages (unless a row says otherwise), %d repeats, tolerance %.1f %%, %s; callgrind outputs in %s\n",
		cfg.nlo, cfg.nhi, cfg.repeats, 100*rec.Tolerance, time.Since(start).Round(time.Second), cfg.out)
	printCountTable(os.Stdout, ms, false)
	if *update {
		rec, err = updated(rec, ms, counts)
		if err != nil {
			fmt.Fprintln(os.Stderr, "perfcompare guard: the record was not written:", err)
			return 1
		}
		rec.Lo, rec.Hi, rec.Repeats = cfg.nlo, cfg.nhi, cfg.repeats
		if err := writeJSON(*recordFile, rec); err != nil {
			fmt.Fprintln(os.Stderr, "perfcompare guard:", err)
			return 2
		}
		fmt.Printf("wrote %s\n", *recordFile)
		return 0
	}
	return report(os.Stdout, judge(rec, measured))
}

// updated is rec with its rows replaced by the measurements (each keeping
// its own counts), or an error when a row of rec was not measured: a
// record written then would drop the row, and the guard would stop
// watching it.
func updated(rec record, ms []measurement, counts map[string][2]int) (record, error) {
	rows := recordRows(ms)
	var missing []string
	for _, r := range rec.Rows {
		if !slices.ContainsFunc(rows, func(n recordRow) bool { return n.Row == r.Row }) {
			missing = append(missing, r.Row)
		}
	}
	if len(missing) > 0 {
		return rec, fmt.Errorf("not measured: %s", strings.Join(missing, ", "))
	}
	for i := range rows {
		rows[i].Lo, rows[i].Hi = counts[rows[i].Row][0], counts[rows[i].Row][1]
	}
	rec.Rows = rows
	return rec, nil
}

// recordRows are the measurements as the record has them.
func recordRows(ms []measurement) []recordRow {
	var out []recordRow
	for _, m := range ms {
		rs := m.ratios(subject)
		if len(rs) == 0 {
			continue
		}
		out = append(out, recordRow{
			Row: m.Row.Name, Base: m.Row.Base, Ratio: round3(median(rs)),
			BasePerMsg:  float64(int(median(m.PerMsg[m.Row.Base]))),
			AcemqPerMsg: float64(int(median(m.PerMsg[subject]))),
			RatioRange:  [2]float64{round3(slices.Min(rs)), round3(slices.Max(rs))},
		})
	}
	return out
}

func round3(x float64) float64 { return float64(int(x*1000+0.5)) / 1000 }
