package testenv

import (
	"flag"
	"fmt"
	"os"
	"testing"
)

// SlowEnv names the switch that runs the slow tests: those that build
// leafd and start it as processes, start a database cluster or drive a
// browser. go test ./... leaves them out, so that a first run is quick;
// bash .ci/run sets it.
const SlowEnv = "LEAFD_TEST_SLOW"

// SlowEnabled reports whether LEAFD_TEST_SLOW=1.
func SlowEnabled() bool { return os.Getenv(SlowEnv) == "1" }

// Slow skips t unless the slow tests were asked for, and always under
// go test -short.
func Slow(t testing.TB) {
	t.Helper()
	if testing.Short() {
		t.Skip("a slow test, left out under -short")
	}
	if !SlowEnabled() {
		t.Skip("a slow test, left out of go test ./...: set " + SlowEnv + "=1 to run it (bash .ci/run does)")
	}
}

// SlowPackage is TestMain's check for a package whose tests are all
// slow: when they were not asked for, it says so and reports false, and
// TestMain returns 0 without running them. go test shows nothing of a
// package that passes but its summary line, so the skip is said twice: in
// a line of its own (seen with -v) and by the warning go test turns into
// "[no tests to run]" after "ok", rather than an "ok" that reads as a
// passed package. go test -list still lists the tests.
func SlowPackage(what string) bool {
	if SlowEnabled() {
		return true
	}
	if !flag.Parsed() {
		flag.Parse()
	}
	if f := flag.Lookup("test.list"); f != nil && f.Value.String() != "" {
		return true // the names only: no test runs
	}
	fmt.Printf("%s: left out of go test ./...: set %s=1 to run them (bash .ci/run does)\n", what, SlowEnv)
	fmt.Println("testing: warning: no tests to run")
	return false
}
