//go:build unix

package serve

import (
	"os/exec"
	"syscall"
)

// detachSignals starts c in a process group of its own, so that a Ctrl-C
// in the terminal reaches serve (which drains) and not the commands it is
// running (which are allowed to finish).
func detachSignals(c *exec.Cmd) {
	c.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
}
