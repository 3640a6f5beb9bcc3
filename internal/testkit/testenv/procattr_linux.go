package testenv

import (
	"os/exec"
	"syscall"
)

// setParentDeathSignal asks Linux to send the process SIGTERM if its parent
// dies without stopping it (kill -9), so that no server is left running.
func setParentDeathSignal(cmd *exec.Cmd) {
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGTERM}
}
