//go:build !unix

package main

// openFileLimit reports no limit where there is no RLIMIT_NOFILE.
func openFileLimit() (uint64, bool) { return 0, false }
