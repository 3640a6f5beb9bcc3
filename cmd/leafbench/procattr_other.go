//go:build !linux

package main

import "os/exec"

// setParentDeathSignal does nothing outside Linux: there a leafd outlives a
// leafbench that is killed with SIGKILL (the baseline still exits, when its
// standard input closes).
func setParentDeathSignal(*exec.Cmd) {}
