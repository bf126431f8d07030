package main

import (
	"testing"

	"github.com/acemq/acemq/internal/cli/clitest"
)

// TestHelpExamplesParse: every example and command reference the help of
// acemq-bench shows parses (clitest.CheckHelpExamples).
func TestHelpExamplesParse(t *testing.T) {
	clitest.CheckHelpExamples(t, newRootCmd, 2)
}
