package nesting

import (
	"strings"
	"testing"
)

func TestJSON(t *testing.T) {
	for _, c := range []struct {
		body string
		max  int
		deep bool
	}{
		{`[[1]]`, 2, false},
		{`[[[1]]]`, 2, true},
		{`{"a":{"b":[]}}`, 3, false},
		{`{"a":{"b":[{}]}}`, 3, true},
		{`["[[[[", "\"[[[["]`, 1, false},
		{`[] [] [] []`, 1, false},
		{`]]]][[`, 1, true}, // a stray close does not buy depth
		{`"unterminated [[[[`, 1, false},
	} {
		if got := JSON([]byte(c.body), c.max); got != c.deep {
			t.Errorf("JSON(%q, %d) = %t", c.body, c.max, got)
		}
	}
}

func TestTOML(t *testing.T) {
	for _, c := range []struct {
		body string
		max  int
		deep bool
	}{
		{"a = [[1]]", 2, false},
		{"a = [[[1]]]", 2, true},
		{"a = {b = {c = 1}}", 2, false},
		{"a = {b = {c = [1]}}", 2, true},
		{"[a.b]\n[[c]]\nx = 1", 2, false},
		{"a = '[[[['\nb = \"[[[[\\\"[[\"\n# [[[[[[\nc = [1]", 1, false},
		{"a = \"\"\"[[[\n\"[[[\"\"\"\"\nb = '''[[[\n'''", 1, false},
		// A one-line string ends at its line, so an unterminated quote
		// does not hide what follows.
		{"a = 'x\nb = [[[1]]]", 2, true},
		{"a = \"x\nb = [[[1]]]", 2, true},
		// Dotted keys nest tables.
		{"a.b = 1", 1, false},
		{"a.b.c = 1", 1, true},
		{"[a.b.c]\nx = 1", 3, false}, // tables a, b and c
		{"[a.b.c.d]\nx = 1", 3, true},
		{"x = {a.b.c = 1}", 3, false}, // tables x, a and b
		{"x = {a.b.c.d = 1}", 3, true},
		{"'a.b.c.d' = 1", 1, false},
		{"x = 1.5\ny = [1.5, 2.5]\nz = 1979-05-27T07:32:00.999Z", 2, false},
	} {
		if got := TOML([]byte(c.body), c.max); got != c.deep {
			t.Errorf("TOML(%q, %d) = %t", c.body, c.max, got)
		}
	}
}

// The scanners allocate nothing, whatever the input.
func TestNoAllocations(t *testing.T) {
	b := []byte(strings.Repeat(`["a\"",{'b'}]#`, 1000))
	if n := testing.AllocsPerRun(10, func() { JSON(b, 10); TOML(b, 10) }); n != 0 {
		t.Errorf("%v allocations", n)
	}
}

// FuzzJSON: the bracket count JSON starts with never changes its answer.
func FuzzJSON(f *testing.F) {
	for _, s := range []string{`[[1]]`, `{"a":{"b":[{}]}}`, `["[[[[", "\"[[[["]`, `]]]][[`, `"unterminated [[[[`, `{}`} {
		f.Add([]byte(s), 2)
	}
	f.Fuzz(func(t *testing.T, body []byte, max int) {
		if got, want := JSON(body, max), jsonScan(body, max); got != want {
			t.Fatalf("JSON(%q, %d) = %t, the scan says %t", body, max, got, want)
		}
	})
}
