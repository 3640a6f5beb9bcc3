//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package testdb

import "testing"

// canLockFile is whether lockFile can take a file's lock on this platform.
const canLockFile = false

// lockFile is not called where canLockFile is false.
func lockFile(tb testing.TB, path string) func() {
	tb.Fatalf("no file lock of %s on this platform", path)
	return nil
}
