package testenv

import (
	"context"
	"time"
)

// TB is the part of testing.TB that MustStart uses; *testing.T and
// *testing.B satisfy it. It is an interface of its own so that this package
// does not import testing, which cmd/leafbench would then carry.
type TB interface {
	Helper()
	Cleanup(func())
	Failed() bool
	Fatalf(format string, args ...any)
	Logf(format string, args ...any)
}

// MustStart starts the process that c describes and waits, for at most
// within, until it reports its address (see Process.WaitServing); it fails
// the test, with the process's output, when the process cannot start,
// exits or stays silent. When the test ends the process is killed if it
// still runs, and its output is logged if the test failed.
func MustStart(tb TB, c Config, within time.Duration) *Process {
	tb.Helper()
	p, err := Start(c)
	if err != nil {
		tb.Fatalf("%v", err)
	}
	tb.Cleanup(func() {
		p.Kill()
		if tb.Failed() {
			tb.Logf("%s output:\n%s", p.Name(), p.Output())
		}
	})
	if _, err := p.WaitServing(context.Background(), within); err != nil {
		tb.Fatalf("%v\n%s", err, p.Output())
	}
	return p
}
