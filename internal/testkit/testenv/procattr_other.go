//go:build !linux

package testenv

import "os/exec"

// setParentDeathSignal does nothing outside Linux: there a server outlives a
// parent that is killed with SIGKILL (one started with Config.HoldStdin
// can still exit when its standard input closes).
func setParentDeathSignal(*exec.Cmd) {}
