package acemq_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine outlives them:
// consumers, their waits and the memory broker must all stop.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
