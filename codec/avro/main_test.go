package avro_test

import (
	"testing"

	"go.uber.org/goleak"
)

// TestMain fails the package's tests when a goroutine (a racing
// registration, the SQL driver's) outlives them.
func TestMain(m *testing.M) { goleak.VerifyTestMain(m) }
