package peers

import (
	"os"
	"testing"

	"github.com/acemq/acemq/internal/perf"

	"go.uber.org/goleak"
)

func TestMain(m *testing.M) {
	if perf.Counting() {
		// Under callgrind the leak check's retries, each dumping every
		// goroutine's stack, would be counted, and their number varies
		// from run to run.
		os.Exit(m.Run())
	}
	goleak.VerifyTestMain(m)
}
