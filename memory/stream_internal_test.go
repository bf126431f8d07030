package memory

import (
	"math"
	"strings"
	"testing"
	"time"

	"github.com/acemq/acemq/driver"
)

// Retention by age and size removes whole segments from the head, only
// when a segment rolls over, and never the segment being written.
func TestStreamRetentionBySegments(t *testing.T) {
	base := time.Unix(1_000_000, 0)
	l := &streamLog{segmentBytes: 100, cursors: map[*sub]int64{}, segments: []int64{0}, maxAge: time.Hour}
	add := func(at time.Time, size int) { l.append(&message{body: []byte(strings.Repeat("x", size))}, at) }
	for i := range 6 { // segments of two 40-byte messages: offsets 0–1, 2–3, 4–5
		add(base.Add(time.Duration(i)*time.Minute), 40)
	}
	if l.base != 0 || len(l.segments) != 3 {
		t.Fatalf("young messages were removed: base %d, segments %v", l.base, l.segments)
	}
	// Two hours later all three are too old: the next message starts a
	// segment, and every closed segment goes, but not the one just begun.
	later := base.Add(2 * time.Hour)
	add(later, 40)
	if l.base != 6 || len(l.entries) != 1 || l.entries[0].at != later {
		t.Errorf("after the age ran out the log starts at %d (segments %v); want 6, the segment being written", l.base, l.segments)
	}
	add(later, 40)
	// By size: a limit of 100 bytes keeps whole segments while over it.
	l.maxAge, l.maxBytes = 0, 100
	for range 4 {
		add(later, 40)
	}
	if l.base != 8 || l.bytes > 100+l.segSize {
		t.Errorf("size retention kept %d bytes from offset %d (segments %v)", l.bytes, l.base, l.segments)
	}
}

func TestStreamStartOffsets(t *testing.T) {
	base := time.Unix(1_000_000, 0)
	l := &streamLog{base: 10, entries: []streamEntry{{at: base}, {at: base.Add(2 * time.Second)}, {at: base.Add(4 * time.Second)}}}
	for _, c := range []struct {
		arg  any
		want int64
	}{
		{"first", 10}, {"last", 12}, {"next", 13}, {int64(11), 11}, {int64(3), 10}, {int64(99), 13},
		{int32(12), 12}, {base.Add(1500 * time.Millisecond), 11}, {base.Add(time.Hour), 13}, {base.Add(-time.Hour), 10},
	} {
		got, err := l.startOffset("s", driver.Table{"x-stream-offset": c.arg})
		if err != nil || got != c.want {
			t.Errorf("x-stream-offset %v: %d, %v; want %d", c.arg, got, err, c.want)
		}
	}
	if got, _ := l.startOffset("s", nil); got != 13 {
		t.Errorf("no x-stream-offset starts at %d, want next (13)", got)
	}
	for _, bad := range []any{"sideways", 1.5, true} {
		if _, err := l.startOffset("s", driver.Table{"x-stream-offset": bad}); err == nil {
			t.Errorf("x-stream-offset %v was accepted", bad)
		}
	}
}

func TestParseMaxAge(t *testing.T) {
	for in, want := range map[string]time.Duration{"7D": 7 * 24 * time.Hour, "36h": 36 * time.Hour, "90m": 90 * time.Minute, "45s": 45 * time.Second, "1Y": 365 * 24 * time.Hour, "2M": 60 * 24 * time.Hour,
		// Longer than a time.Duration holds (FuzzParseMaxAge found it
		// overflowing to a negative age): RabbitMQ 3.10 takes these, and
		// here they are the longest age there is.
		"28200000Y": time.Duration(math.MaxInt64), "4294967297s": 4294967297 * time.Second,
		"99999999999999s": time.Duration(math.MaxInt64), "999999999999999999999999999999D": time.Duration(math.MaxInt64)} {
		if got, err := parseMaxAge(in); err != nil || got != want {
			t.Errorf("parseMaxAge(%q) = %v, %v", in, got, err)
		}
	}
	for _, bad := range []string{"", "7", "D", "0s", "-1h", "1.5h", "7d", "00s"} {
		if _, err := parseMaxAge(bad); err == nil {
			t.Errorf("parseMaxAge(%q) succeeded", bad)
		}
	}
}

func FuzzParseMaxAge(f *testing.F) {
	for _, s := range []string{"7D", "36h", "0s", "", "1Y"} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		if d, err := parseMaxAge(s); err == nil && d <= 0 {
			t.Fatalf("parseMaxAge(%q) = %v", s, d)
		}
	})
}
