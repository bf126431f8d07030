package schedule

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them: the
// control consumers and their waits must all stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
