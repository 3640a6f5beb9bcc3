//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package sqlite_test

import (
	"os"
	"sync"
	"syscall"
	"testing"
)

// holdFileLock takes the exclusive flock another process migrating would
// hold and returns the function that releases it (once, however often it
// is called).
func holdFileLock(t *testing.T, path string) (release func()) {
	t.Helper()
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB); err != nil {
		f.Close()
		t.Fatalf("flock %s: %v", path, err)
	}
	var once sync.Once
	release = func() { once.Do(func() { f.Close() }) }
	t.Cleanup(release)
	return release
}

func init() {
	holdMigrateLock = func(t *testing.T, dbFile string) func() {
		return holdFileLock(t, dbFile+".migrate.lock")
	}
}
