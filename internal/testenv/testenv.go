// Package testenv gives tests the broker URL and the shared contract folder,
// with the project's rules: a test that needs a broker skips when
// ACEMQ_TEST_AMQP_URL is unset, except in CI (CI set), where it fails; a
// contract test skips when ../shared/contract is absent, except in CI.
package testenv

import (
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"testing"
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

// Root is the module's root folder.
func Root() string {
	_, file, _, _ := runtime.Caller(0)
	return filepath.Clean(filepath.Join(filepath.Dir(file), "..", ".."))
}

// ContractDir returns the shared contract folder (../shared/contract beside
// the checkout, or ACEMQ_CONTRACT_DIR), or skips the test when it is absent
// outside CI. In CI a missing folder fails the test.
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
