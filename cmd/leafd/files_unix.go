//go:build unix

package main

import "syscall"

// openFileLimit is the process's open-file limit (RLIMIT_NOFILE), which
// the Go runtime has raised to its hard limit at start-up; false when it
// cannot be read.
func openFileLimit() (uint64, bool) {
	var l syscall.Rlimit
	if err := syscall.Getrlimit(syscall.RLIMIT_NOFILE, &l); err != nil {
		return 0, false
	}
	return l.Cur, true
}
