//go:build !(darwin || dragonfly || freebsd || linux || netbsd || openbsd)

package sqlite

import "context"

// lockFile does nothing where flock is not available: processes that share
// one SQLite file there must not run their migrations at the same moment
// (SQLite's own locking still keeps every transaction whole).
func lockFile(ctx context.Context, path string) (unlock func(), err error) {
	return func() {}, nil
}
