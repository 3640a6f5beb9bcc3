//go:build darwin || dragonfly || freebsd || linux || netbsd || openbsd

package sqlite

import (
	"context"
	"errors"
	"fmt"
	"os"
	"syscall"
	"time"

	"github.com/leafd/leafd/store/internal/engine"
)

// lockFile takes an exclusive flock on path, creating the file if needed,
// and returns the function that releases it. It polls rather than blocks so
// that it can give up when ctx ends. The lock dies with the process, so a
// crashed migration never leaves it behind; the file itself stays.
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("open the lock file: %w", err)
	}
	wait := time.Millisecond
	for {
		err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX|syscall.LOCK_NB)
		if err == nil {
			return func() {
				_ = syscall.Flock(int(f.Fd()), syscall.LOCK_UN)
				_ = f.Close()
			}, nil
		}
		if !errors.Is(err, syscall.EWOULDBLOCK) && !errors.Is(err, syscall.EINTR) {
			f.Close()
			return nil, fmt.Errorf("lock %s: %w", path, err)
		}
		if err := engine.Sleep(ctx, wait); err != nil {
			f.Close()
			return nil, fmt.Errorf("waiting for the lock %s, held by another process: %w", path, err)
		}
		wait = min(2*wait, 100*time.Millisecond)
	}
}
