package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"strings"
	"testing"

	"github.com/acemq/acemq"
	"github.com/acemq/acemq/memory"
	"github.com/acemq/acemq/queues"
	"go.uber.org/goleak"
)

func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }

func TestRun(t *testing.T) {
	url := "memory://" + t.Name()
	t.Cleanup(func() { memory.Reset(url) })
	var out bytes.Buffer
	if err := run(context.Background(), []string{"-url", url, "-timeout", "5s"}, &out); err != nil {
		t.Fatal(err)
	}
	if got, want := out.String(), "order.placed acked on attempt 1\n"; got != want {
		t.Errorf("output %q, want %q", got, want)
	}

	// It leaves nothing behind.
	ctx := context.Background()
	conn, err := acemq.Connect(ctx, url)
	if err != nil {
		t.Fatal(err)
	}
	defer func() {
		if err := conn.Close(ctx); err != nil {
			t.Error(err)
		}
	}()
	for _, q := range []string{"orders.new", "orders.new.dlq", "orders.new.parked"} {
		if _, err := queues.Inspect(ctx, conn, q); !errors.Is(err, acemq.ErrNotFound) {
			t.Errorf("the queue %s is still there after the run (Inspect: %v)", q, err)
		}
	}
}

// TestREADME fails when the README's "What it does" sample is not the
// region of main.go between README:begin and README:end, so that the
// sample is always a program that compiles and runs.
func TestREADME(t *testing.T) {
	readme, err := os.ReadFile("../../README.md")
	if err != nil {
		t.Fatal(err)
	}
	main, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	sample, err := readmeSample(string(readme))
	if err != nil {
		t.Fatal(err)
	}
	region, err := between(string(main), "\n// README:begin\n", "\n// README:end\n")
	if err != nil {
		t.Fatalf("main.go: %v", err)
	}
	if sample != region {
		t.Errorf("README.md's \"What it does\" sample differs from examples/quickstart/main.go's README region; copy the region into README.md.\nREADME.md:\n%s\nmain.go:\n%s", sample, region)
	}
}

// readmeSample returns the first Go code block of the README's "What it
// does" section.
func readmeSample(readme string) (string, error) {
	_, section, ok := strings.Cut(readme, "\n## What it does\n")
	if !ok {
		return "", errors.New(`README.md has no "## What it does" section`)
	}
	if next := strings.Index(section, "\n## "); next >= 0 {
		section = section[:next]
	}
	block, err := between(section, "```go\n", "```\n")
	if err != nil {
		return "", fmt.Errorf(`README.md's "What it does" section: %w`, err)
	}
	return block, nil
}

// between returns the text of s after the first line begin and before the
// next line end, without trailing blank lines.
func between(s, begin, end string) (string, error) {
	i := strings.Index(s, begin)
	if i < 0 {
		return "", fmt.Errorf("no %q line", strings.TrimSpace(begin))
	}
	rest := s[i+len(begin):]
	j := strings.Index(rest, end)
	if j < 0 {
		return "", fmt.Errorf("no %q line after %q", strings.TrimSpace(end), strings.TrimSpace(begin))
	}
	return strings.TrimRight(rest[:j], "\n") + "\n", nil
}
