//go:build unix

package main

import (
	"os/exec"
	"syscall"
)

// ownGroup puts cmd in its own process group and makes cancellation kill the whole
// group, so that a compiler the engine started does not outlive a timeout or Ctrl-C.
func ownGroup(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	cmd.Cancel = func() error { return syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL) }
}
