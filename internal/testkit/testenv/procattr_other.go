//go:build !linux

package testenv

import (
	"os"
	"os/exec"
)

// setProcAttr does nothing outside Linux: there a server outlives a parent
// that is killed with SIGKILL (one started with Config.HoldStdin can still
// exit when its standard input closes), has no group of its own and runs
// as this process's user.
func setProcAttr(*exec.Cmd, Config) error { return nil }

// UserIDs returns -1, -1: outside Linux a server runs as this process's
// user.
func UserIDs(string) (uid, gid int, err error) { return -1, -1, nil }

// signal sends sig to cmd's process.
func signal(cmd *exec.Cmd, _ bool, sig os.Signal) error { return cmd.Process.Signal(sig) }
