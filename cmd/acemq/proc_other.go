//go:build !unix

package main

import "os/exec"

// detachSignals does nothing where process groups are not available.
func detachSignals(c *exec.Cmd) {}
