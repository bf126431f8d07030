// Package testenv gives tests the broker URL and the shared contract folder,
// with the project's rules: a test that needs a broker skips when
// ACEMQ_TEST_AMQP_URL is unset, except in CI (CI set), where it fails; a
// contract test skips when the shared contract folder is absent, except in CI. It
// also names things after the test (Name, Unique), polls (Eventually), and
// controls the broker under test (Ctl, ManagementURL, BrokerVersion; see
// broker.go).
//
// It imports only the standard library, so every package's tests can use
// it; helpers that need package acemq live in internal/brokertest.
package testenv

import (
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// InCI reports whether the tests run in CI.
func InCI() bool { return os.Getenv("CI") != "" }

// AMQPURL returns the RabbitMQ URL for broker tests, or skips the test (fails
// it in CI) when ACEMQ_TEST_AMQP_URL is unset.
func AMQPURL(t testing.TB) string {
	t.Helper()
	u := strings.TrimSpace(os.Getenv("ACEMQ_TEST_AMQP_URL"))
	if u == "" {
		if InCI() {
			t.Fatal("ACEMQ_TEST_AMQP_URL is not set: in CI a broker test must not be skipped")
		}
		t.Skip("ACEMQ_TEST_AMQP_URL is not set; skipping a test that needs RabbitMQ")
	}
	return u
}

// Faults skips a test that hurts the broker for everyone (closing all
// connections, a resource alarm, stopping the app) unless ACEMQ_TEST_FAULTS
// is 1. CI runs those tests alone, in a step of their own.
func Faults(t testing.TB) {
	t.Helper()
	if os.Getenv("ACEMQ_TEST_FAULTS") != "1" {
		t.Skip("a fault-injection test: set ACEMQ_TEST_FAULTS=1 to run it (alone, -p 1)")
	}
}

// ClusterURLs returns the AMQP URLs of the test cluster's nodes
// (scripts/cluster up: rabbit2@localhost, rabbit3@localhost and
// rabbit4@localhost on 127.0.0.1:5690, 5700 and 5710; scripts/cluster -v 4.3
// up: rabbit5@localhost to rabbit7@localhost on 5720, 5730 and 5740), from the
// comma-separated ACEMQ_TEST_CLUSTER_URLS. Cluster tests stop, kill and cut
// off those nodes, never the machine's own broker, but they load the
// machine: they run only with ACEMQ_TEST_CLUSTER=1 (CI's cluster step),
// and skip otherwise. Once asked for, a missing or short URL list fails
// the test: a cluster test is never skipped in that step.
func ClusterURLs(t testing.TB) []string {
	t.Helper()
	if os.Getenv("ACEMQ_TEST_CLUSTER") != "1" {
		t.Skip("a cluster test: run scripts/cluster up, then set ACEMQ_TEST_CLUSTER=1 and ACEMQ_TEST_CLUSTER_URLS=$(scripts/cluster urls)")
	}
	var urls []string
	for _, u := range strings.Split(os.Getenv("ACEMQ_TEST_CLUSTER_URLS"), ",") {
		if u = strings.TrimSpace(u); u != "" {
			urls = append(urls, u)
		}
	}
	if len(urls) < 3 {
		t.Fatalf("ACEMQ_TEST_CLUSTER=1 but ACEMQ_TEST_CLUSTER_URLS names %d nodes, want the cluster's 3 (scripts/cluster urls prints them)", len(urls))
	}
	return urls
}

// Rabbitmqctl runs rabbitmqctl with args against the broker under test
// (Ctl), within 90 s, and reports whether it succeeded. A failure is
// reported with t.Errorf, which is safe from any goroutine; a caller that
// cannot go on calls t.FailNow.
func Rabbitmqctl(t testing.TB, args ...string) bool {
	t.Helper()
	if _, err := Ctl(args...); err != nil {
		t.Errorf("%v", err)
		return false
	}
	return true
}

// Root is the module's root folder.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// ContractDir returns the contract folder the sibling libraries share: the
// folder contract inside the folder shared next to the checkout, or
// ACEMQ_CONTRACT_DIR. It skips the test when the folder is absent outside
// CI; in CI a missing folder fails the test.
func ContractDir(t testing.TB) string {
	t.Helper()
	dir := os.Getenv("ACEMQ_CONTRACT_DIR")
	if dir == "" {
		dir = filepath.Join(Root(), "..", "shared", "contract")
	}
	if _, err := os.Stat(dir); err != nil {
		if InCI() {
			t.Fatalf("the shared contract folder %s is missing: in CI that is a failure", dir)
		}
		t.Skipf("the shared contract folder %s is absent; skipping a conformance test", dir)
	}
	return dir
}

// ContractFile returns the path of a fixture in the contract folder, failing
// the test when the folder exists but the file does not.
func ContractFile(t testing.TB, name string) string {
	t.Helper()
	p := filepath.Join(ContractDir(t), name)
	if _, err := os.Stat(p); err != nil {
		t.Fatalf("the contract fixture %s is missing: %v", p, err)
	}
	return p
}

// Name is t.Name() with every character other than an ASCII letter or
// digit replaced by '-': fit for a memory:// URL or a queue name.
func Name(t testing.TB) string {
	return strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= 'A' && r <= 'Z' || r >= '0' && r <= '9' {
			return r
		}
		return '-'
	}, t.Name())
}

// Unique returns a queue or exchange name for the test that no other run
// shares: prefix, the last 60 characters of Name(t) and eight random hex
// digits, joined by '-'.
func Unique(t testing.TB, prefix string) string {
	n := Name(t)
	if len(n) > 60 {
		n = n[len(n)-60:]
	}
	return fmt.Sprintf("%s-%s-%08x", prefix, strings.Trim(n, "-"), rand.Uint32())
}

// Patience is how long Eventually waits: long enough for a loaded CI
// machine and a real broker, and only ever spent by a test that fails.
const Patience = 20 * time.Second

// Eventually polls cond every 5 ms until it holds, and fails the test when
// it still does not after Patience. what names the awaited state in the
// failure message.
func Eventually(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(Patience)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out after %v waiting for %s", Patience, what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// PostgresDSN returns the PostgreSQL data source name for database tests
// (a URL such as postgres://postgres@127.0.0.1:5432/test?sslmode=disable),
// or skips the test (fails it in CI) when ACEMQ_TEST_POSTGRES_DSN is unset.
func PostgresDSN(t testing.TB) string {
	t.Helper()
	return dsn(t, "ACEMQ_TEST_POSTGRES_DSN", "PostgreSQL")
}

// MySQLDSN returns the MySQL/MariaDB data source name for database tests
// (go-sql-driver form, such as root@tcp(127.0.0.1:3306)/test?parseTime=true),
// or skips the test (fails it in CI) when ACEMQ_TEST_MYSQL_DSN is unset.
func MySQLDSN(t testing.TB) string {
	t.Helper()
	return dsn(t, "ACEMQ_TEST_MYSQL_DSN", "MySQL/MariaDB")
}

func dsn(t testing.TB, env, what string) string {
	t.Helper()
	v := strings.TrimSpace(os.Getenv(env))
	if v == "" {
		if InCI() {
			t.Fatalf("%s is not set: in CI a database test must not be skipped", env)
		}
		t.Skipf("%s is not set; skipping a test that needs %s", env, what)
	}
	return v
}

// Table returns a table name for the test that no other run shares:
// prefix and eight random hex digits, fit for an SQL identifier.
func Table(prefix string) string { return fmt.Sprintf("%s_%08x", prefix, rand.Uint32()) }

// CloseConnection closes, with rabbitmqctl (Ctl), the connections to the
// broker under test named name (their connection_name client property)
// and no other, and reports how many it closed. It is for TestFault tests,
// which kill only the connections they opened.
func CloseConnection(t testing.TB, name string) int {
	t.Helper()
	out, err := Ctl("list_connections", "-q", "--no-table-headers", "pid", "client_properties")
	if err != nil {
		t.Errorf("%v", err)
		return 0
	}
	closed := 0
	want := `{"connection_name",` + strconv.Quote(name) + `}`
	for _, line := range strings.Split(out, "\n") {
		pid, props, ok := strings.Cut(line, "\t")
		if !ok || !strings.Contains(props, want) {
			continue
		}
		if Rabbitmqctl(t, "close_connection", pid, "acemq fault test: closing its own connection") {
			closed++
		}
	}
	return closed
}
