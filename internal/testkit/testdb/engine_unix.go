//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package testdb

import (
	"os"
	"sync"
	"syscall"
	"testing"
)

// canLockFile is whether lockFile can take a file's lock on this platform.
const canLockFile = true

// lockFile takes the exclusive flock that a store migrating holds on path
// and returns the function that releases it, once however often it is
// called and at the latest when the test ends.
func lockFile(tb testing.TB, path string) (release func()) {
	tb.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		tb.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		tb.Fatalf("flock %s: %v", path, err)
	}
	var once sync.Once
	release = func() { once.Do(func() { f.Close() }) }
	tb.Cleanup(release)
	return release
}
