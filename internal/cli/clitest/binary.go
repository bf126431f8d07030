package clitest

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"go.uber.org/goleak"
)

// Main is the body of a command package's TestMain: it builds the command
// in the test's directory into a temporary folder as name, sets *path to
// the binary, runs the tests and then looks for leaked goroutines. It
// returns the exit code for os.Exit.
func Main(m *testing.M, name string, path *string) int {
	dir, err := os.MkdirTemp("", name+"-test-")
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		return 1
	}
	defer os.RemoveAll(dir)
	*path = filepath.Join(dir, name)
	build := exec.Command("go", "build", "-o", *path, ".")
	build.Stdout, build.Stderr = os.Stderr, os.Stderr
	if err := build.Run(); err != nil {
		fmt.Fprintf(os.Stderr, "building %s: %v\n", name, err)
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

// Run runs the binary at path with args, stdin and env (added to the test
// process's environment), within two minutes, and returns its exit code
// and output. It fails t when the binary could not be run at all.
func Run(t *testing.T, path string, env []string, stdin string, args ...string) (code int, stdout, stderr string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	cmd := exec.CommandContext(ctx, path, args...)
	cmd.Env = append(os.Environ(), env...)
	cmd.Stdin = strings.NewReader(stdin)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	if err := cmd.Run(); err != nil {
		ee, ok := err.(*exec.ExitError)
		if !ok {
			t.Fatalf("running %s %s: %v", filepath.Base(path), strings.Join(args, " "), err)
		}
		code = ee.ExitCode()
	}
	return code, out.String(), errb.String()
}
