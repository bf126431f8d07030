//go:build !unix

package serve

import "os/exec"

// detachSignals does nothing where process groups are not available.
func detachSignals(c *exec.Cmd) {}
