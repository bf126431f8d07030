package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/acemq/acemq/memory"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	url := "memory://" + t.Name()
	t.Cleanup(func() { memory.Reset(url) })
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-url", url}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	want := `line 3: skipped: the amount "n/a" is not a number of pence
line 4: not imported: no queue takes region "mars"
4 of 5 orders imported, 1 not
orders.imported holds 4
`
	if out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}

// TestRunAFile: a file longer than the connection's window of 1,000
// unconfirmed publishes is imported whole.
func TestRunAFile(t *testing.T) {
	url := "memory://" + t.Name()
	t.Cleanup(func() { memory.Reset(url) })
	var sb strings.Builder
	for i := range 2500 {
		region := "eu"
		if i%2 == 1 {
			region = "us"
		}
		sb.WriteString("o-" + strings.Repeat("x", i%3) + "," + region + ",100\n")
	}
	path := filepath.Join(t.TempDir(), "orders.csv")
	if err := os.WriteFile(path, []byte(sb.String()), 0o600); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-url", url, "-file", path}, &out); err != nil {
		t.Fatalf("%v\n%s", err, out.String())
	}
	if want := "2500 of 2500 orders imported\norders.imported holds 2500\n"; out.String() != want {
		t.Errorf("output:\n%s\nwant:\n%s", out.String(), want)
	}
}
