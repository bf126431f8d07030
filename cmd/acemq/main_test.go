package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"strings"
	"testing"

	"github.com/acemq/acemq/internal/cli"
	"github.com/acemq/acemq/internal/cli/clitest"
	"github.com/spf13/cobra"
)

// acemqBinary is the acemq command built once for the end-to-end tests.
var acemqBinary string

func TestMain(m *testing.M) {
	os.Exit(testMain(m))
}

func testMain(m *testing.M) int { return clitest.Main(m, "acemq", &acemqBinary) }

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
	var r result
	r.code, r.stdout, r.stderr = clitest.Run(t, acemqBinary, env, stdin, args...)
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
var demoSteps = []string{"orders", "pricing", "documents", "route", "replay", "exactly-once"}

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

// brokerFlags are the flags of a command that connects to a broker.
var brokerFlags = []string{"url", "tls-ca", "tls-cert", "tls-key", "tls-allow-development"}

// TestBrokerFlagsOnlyOnCommandsThatConnect: --url and the TLS flags belong
// to the commands that connect, and appear nowhere else (not on the root,
// not on envelope or certs).
func TestBrokerFlagsOnlyOnCommandsThatConnect(t *testing.T) {
	connects := map[string]bool{"demo": true, "publish": true, "consume": true, "ask": true, "serve": true, "replay": true, "console": true,
		"queue list": true, "queue declare": true, "queue delete": true, "queue purge": true,
		"exchange list": true, "exchange declare": true, "exchange delete": true, "bind": true, "unbind": true}
	root := newRootCmd()
	for _, name := range brokerFlags {
		if root.PersistentFlags().Lookup(name) != nil || root.Flags().Lookup(name) != nil {
			t.Errorf("the root command has --%s", name)
		}
	}
	seen := 0
	var walk func(c *cobra.Command)
	walk = func(c *cobra.Command) {
		for _, sub := range c.Commands() {
			want := connects[strings.TrimPrefix(sub.CommandPath(), "acemq ")]
			if want {
				seen++
			}
			for _, name := range brokerFlags {
				if got := sub.Flags().Lookup(name) != nil; got != want {
					t.Errorf("%s: has --%s = %v, want %v", sub.CommandPath(), name, got, want)
				}
			}
			walk(sub)
		}
	}
	walk(root)
	if seen != len(connects) {
		t.Errorf("found %d of the %d commands that connect", seen, len(connects))
	}

	for _, args := range [][]string{{"envelope", "decode", "--url", "memory://x"}, {"certs", "--tls-ca", "ca.pem"}, {"--url", "memory://x", "envelope", "decode"}} {
		r := runCLI(t, "{}", args...).wantCode(t, 1)
		if !strings.Contains(r.stderr, "unknown flag") {
			t.Errorf("acemq %s: stderr %q, want an unknown flag", strings.Join(args, " "), r.stderr)
		}
	}
	if r := runCLI(t, "", "--help").wantCode(t, 0); strings.Contains(r.stdout, "--url") || strings.Contains(r.stdout, "--tls-") {
		t.Errorf("acemq --help lists broker flags:\n%s", r.stdout)
	}
	if r := runCLI(t, "", "envelope", "encode", "--help").wantCode(t, 0); strings.Contains(r.stdout, "--url") {
		t.Errorf("acemq envelope encode --help lists --url:\n%s", r.stdout)
	}
	for _, c := range []string{"publish", "demo"} {
		r := runCLI(t, "", c, "--help").wantCode(t, 0)
		for _, name := range brokerFlags {
			if !strings.Contains(r.stdout, "--"+name) {
				t.Errorf("acemq %s --help lacks --%s:\n%s", c, name, r.stdout)
			}
		}
	}
	if r := runCLI(t, "", "demo", "--help").wantCode(t, 0); !strings.Contains(r.stdout, "default memory://demo") {
		t.Errorf("acemq demo --help does not give its own default:\n%s", r.stdout)
	}
}

// TestBuiltinDefaultURL: only a command given neither --url nor $ACEMQ_URL
// uses the built-in default, and a failure to connect there says how to
// name a broker.
func TestBuiltinDefaultURL(t *testing.T) {
	parse := func(args ...string) (string, bool) {
		t.Helper()
		cmd, rest, err := newRootCmd().Find(append([]string{"consume"}, args...))
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.ParseFlags(rest); err != nil {
			t.Fatal(err)
		}
		return cli.BrokerURL(cmd)
	}
	t.Setenv("ACEMQ_URL", "")
	if url, builtin := parse(); url != cli.DefaultAMQPURL || !builtin {
		t.Errorf("no --url, no $ACEMQ_URL: %q, builtin %v", url, builtin)
	}
	if url, builtin := parse("--url", "amqp://h/"); url != "amqp://h/" || builtin {
		t.Errorf("--url: %q, builtin %v", url, builtin)
	}
	t.Setenv("ACEMQ_URL", "amqp://env/")
	if url, builtin := parse(); url != "amqp://env/" || builtin {
		t.Errorf("$ACEMQ_URL: %q, builtin %v", url, builtin)
	}

	refused := fmt.Errorf("rabbitmq: cannot connect to the broker: %w", &net.OpError{Op: "dial", Net: "tcp", Err: errors.New("connect: connection refused")})
	msg := cli.ConnectError(cli.DefaultAMQPURL, true, refused).Error()
	for _, want := range []string{"no broker answered at the default URL amqp://guest:xxxxx@localhost:5672/", "set --url or ACEMQ_URL", "memory://", "connection refused"} {
		if !strings.Contains(msg, want) {
			t.Errorf("the default's failure %q lacks %q", msg, want)
		}
	}
	if strings.Contains(msg, "guest:guest") {
		t.Errorf("the default's failure shows the password: %q", msg)
	}
	// A broker that answers and refuses (the guest user is not allowed,
	// say) did answer.
	msg = cli.ConnectError(cli.DefaultAMQPURL, true, errors.New(`Exception (403) Reason: "username or password not allowed"`)).Error()
	if !strings.Contains(msg, "could not connect to the default URL amqp://guest:xxxxx@localhost:5672/: set --url or ACEMQ_URL") {
		t.Errorf("the default's refusal: %q", msg)
	}
	if msg := cli.ConnectError("amqp://guest:guest@rabbit:5672/", false, refused).Error(); strings.Contains(msg, "default") {
		t.Errorf("a chosen URL's failure talks about the default: %q", msg)
	}
	var ee *cli.ExitError
	if !errors.As(cli.ConnectError(cli.DefaultAMQPURL, true, refused), &ee) || ee.Code() != cli.ExitFailure {
		t.Errorf("the default's failure does not exit %d", cli.ExitFailure)
	}
}

// TestMemoryURLHint: the commands that need a broker other commands share
// explain, when what they look for is missing on memory://, that it is
// this process's own broker.
func TestMemoryURLHint(t *testing.T) {
	const hint = "memory://x is this process's own in-memory broker, empty when the command starts: another acemq command cannot see what it holds; set --url or ACEMQ_URL"
	for _, tc := range []struct {
		code int
		args []string
	}{
		{cli.ExitUnroutable, []string{"publish", "--url", "memory://x", "--exchange", "", "--routing-key", "orders", "x"}},
		{cli.ExitFailure, []string{"publish", "--url", "memory://x", "--exchange", "orders", "--routing-key", "k", "x"}},
		{cli.ExitFailure, []string{"consume", "--url", "memory://x", "--queue", "orders"}},
		{cli.ExitUnroutable, []string{"ask", "--url", "memory://x", "--exchange", "", "--routing-key", "pricing", "x"}},
		{cli.ExitFailure, []string{"serve", "--url", "memory://x", "--queue", "pricing", "--", "cat"}},
		{cli.ExitFailure, []string{"replay", "--url", "memory://x", "--queue", "orders.dlq"}},
	} {
		r := runCLI(t, "", tc.args...).wantCode(t, tc.code)
		if !strings.Contains(r.stderr, hint) || strings.Count(strings.TrimSpace(r.stderr), "\n") != 0 {
			t.Errorf("acemq %s: stderr %q, want one line with the memory:// hint", strings.Join(tc.args, " "), r.stderr)
		}
	}
	// Elsewhere, no hint: a missing queue on another broker is just missing.
	r := runCLI(t, "", "consume", "--url", "memory2://nowhere", "--queue", "q").wantCode(t, 1)
	if strings.Contains(r.stderr, "in-memory broker") {
		t.Errorf("a non-memory URL got the memory:// hint: %q", r.stderr)
	}
}

// TestBinaryLinksNoTesting: the operator's binary links no package testing
// (the benchmark harness, internal/perf, does; it is acemq-bench's).
func TestBinaryLinksNoTesting(t *testing.T) {
	out, err := exec.Command("go", "list", "-deps", ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go list -deps: %v\n%s", err, out)
	}
	for _, pkg := range strings.Fields(string(out)) {
		if pkg == "testing" || pkg == "github.com/acemq/acemq/internal/perf" {
			t.Errorf("acemq links %s", pkg)
		}
	}
}
