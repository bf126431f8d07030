package main

import (
	"bytes"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// acemqBinary is the acemq command built once for the end-to-end tests.
var acemqBinary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int {
	dir, err := os.MkdirTemp("", "acemq-cli-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	acemqBinary = filepath.Join(dir, "acemq")
	build := exec.Command("go", "build", "-o", acemqBinary, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintln(os.Stderr, "building the acemq acemqBinary:", err)
		return 1
	}
	code := m.Run()
	if code == 0 {
		if err := goleak.Find(); err != nil {
			fmt.Fprintln(os.Stderr, "goleak:", err)
			return 1
		}
	}
	return code
}

// result is one run of the acemqBinary.
type result struct {
	code           int
	stdout, stderr string
}

// runCLI runs the acemqBinary with args and stdin, within a deadline.
func runCLI(t *testing.T, stdin string, args ...string) result {
	t.Helper()
	return acemqEnv(t, nil, stdin, args...)
}

func acemqEnv(t *testing.T, env []string, stdin string, args ...string) result {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, acemqBinary, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	r := result{stdout: out.String(), stderr: errb.String()}
	if err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running acemq %s: %v", strings.Join(args, " "), err)
		}
		r.code = ee.ExitCode()
	}
	return r
}

// wantCode fails the test unless r exited with code.
func (r result) wantCode(t *testing.T, code int) result {
	t.Helper()
	if r.code != code {
		t.Fatalf("exit code %d, want %d\nstdout:\n%s\nstderr:\n%s", r.code, code, r.stdout, r.stderr)
	}
	return r
}

// jsonLines parses every non-empty line of s as a JSON object.
func jsonLines(t *testing.T, s string) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(s, "\n") {
		if strings.TrimSpace(line) == "" {
			continue
		}
		dec := json.NewDecoder(strings.NewReader(line))
		dec.UseNumber()
		var m map[string]any
		if err := dec.Decode(&m); err != nil {
			t.Fatalf("not a JSON object line: %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestHelpOnEveryCommand(t *testing.T) {
	root := newRootCmd()
	var paths [][]string
	for _, c := range root.Commands() {
		paths = append(paths, []string{c.Name()})
		for _, sub := range c.Commands() {
			paths = append(paths, []string{c.Name(), sub.Name()})
		}
	}
	if len(paths) == 0 {
		t.Fatal("no commands")
	}
	for _, p := range paths {
		r := runCLI(t, "", append(p, "--help")...).wantCode(t, 0)
		if !strings.Contains(r.stdout, "Usage:") {
			t.Errorf("acemq %s --help printed no usage:\n%s", strings.Join(p, " "), r.stdout)
		}
	}
}

func TestUnknownFlagExitsOne(t *testing.T) {
	r := runCLI(t, "", "envelope", "decode", "--no-such-flag").wantCode(t, 1)
	if !strings.Contains(r.stderr, "unknown flag") {
		t.Errorf("stderr %q does not name the unknown flag", r.stderr)
	}
	runCLI(t, "", "no-such-command").wantCode(t, 1)
}

func TestDemoOnMemory(t *testing.T) {
	r := runCLI(t, "", "demo").wantCode(t, 0)
	checkDemoOutput(t, r.stdout)
}

// demoSteps are the steps every demo run must report as ok.
var demoSteps = []string{"orders", "pricing", "documents", "route", "replay"}

// checkDemoOutput checks the summary of a successful demo run.
func checkDemoOutput(t *testing.T, out string) {
	t.Helper()
	for _, want := range []string{"every step did what it says", "STEP", "QUEUE", "acked", "retried", "rejected", "parked"} {
		if !strings.Contains(out, want) {
			t.Errorf("demo output lacks %q:\n%s", want, out)
		}
	}
	_, summary, ok := strings.Cut(out, "STEP ")
	if !ok {
		t.Fatalf("no summary table:\n%s", out)
	}
	for _, step := range demoSteps {
		found := false
		for _, line := range strings.Split(summary, "\n") {
			if f := strings.Fields(line); len(f) >= 2 && f[0] == step {
				found = true
				if f[1] != "ok" {
					t.Errorf("step %s: %s", step, line)
				}
			}
		}
		if !found {
			t.Errorf("step %s missing from the summary:\n%s", step, summary)
		}
	}
	if strings.Contains(out, "FAILED") {
		t.Errorf("demo output reports a failure:\n%s", out)
	}
}

func TestHelpNeverPrintsThePasswordOfACEMQURL(t *testing.T) {
	r := acemqEnv(t, []string{"ACEMQ_URL=amqp://ops:s3cret-pw@rabbit:5672/"}, "", "publish", "--help").wantCode(t, 0)
	if strings.Contains(r.stdout+r.stderr, "s3cret-pw") {
		t.Errorf("--help printed the password:\n%s", r.stdout)
	}
	// And $ACEMQ_URL is what a command connects to.
	r = acemqEnv(t, []string{"ACEMQ_URL=memory2://nowhere"}, "", "consume", "--queue", "q").wantCode(t, 1)
	if !strings.Contains(r.stderr, "memory2") {
		t.Errorf("$ACEMQ_URL was not used: %s", r.stderr)
	}
}
