package testenv

import (
	"context"
	"os"
	"testing"
	"time"
)

// MustStartIn starts a server of the tests (a database cluster, a proxy)
// for tb with start, given at most within, in a new directory under the
// system's temporary directory: a short path, whose parents another user
// (mysql, postgres) can search, unlike tb.TempDir's. The server is stopped
// when the test ends; if the test failed, the end of its logs (logs) is
// logged and the directory kept, otherwise the directory is removed. name
// names the server in the directory and the messages.
func MustStartIn[S interface{ Stop() }](tb testing.TB, name string, within time.Duration,
	start func(ctx context.Context, dir string) (S, error), logs func(S) string) S {
	tb.Helper()
	dir, err := os.MkdirTemp("", "leafd-"+name+"-")
	if err != nil {
		tb.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), within)
	defer cancel()
	s, err := start(ctx, dir)
	if err != nil {
		tb.Fatalf("%v\n(%s's files are kept in %s)", err, name, dir)
	}
	tb.Cleanup(func() {
		s.Stop()
		if tb.Failed() {
			tb.Logf("%s's logs, the last lines:\n%s\n(every file is kept in %s)", name, logs(s), dir)
			return
		}
		os.RemoveAll(dir)
	})
	return s
}
