// Package testenv is the one process harness of leafd's tests: it runs
// real leafd processes for the process tests of cmd/leafd, the end-to-end
// suite (e2e/) and cmd/leafbench, and the database servers and proxies of
// the tests (pgserver, galera, haproxy) run on it too.
//
// What lives here:
//
//   - Build and Binary build the leafd binary, Binary at most once per test
//     run (or per leafbench run).
//   - Env is the environment that isolates a leafd from the developer's: no
//     ./config.yaml settings from the caller's environment, its own HOME, and
//     the two settings through which a process gets a free port: leafd
//     listens on 127.0.0.1:0, so the kernel picks a port nothing uses, and
//     reports it in its JSON log, where WaitServing reads it. No port is
//     picked beforehand, so none can be taken by another process in between.
//   - Start runs a server process with its configuration and environment,
//     collects its output (all of it, or its head and tail) and tells when
//     it exited; Process.WaitServing waits until it reports its address,
//     WaitReady until /readyz answers 200; Process.Stop sends SIGTERM (and
//     SIGKILL after a grace period), Process.Kill sends SIGKILL.
//   - MustStart is Start for a test: it fails the test when the process does
//     not come up, kills the process when the test ends and logs its output
//     if the test failed.
//   - Config.Group, DeathSignal, StopSignal, User and LogFile serve the
//     other servers: a process group that Stop and Kill end whole, the
//     signal a server gets when the test dies, the user it runs as when
//     the test runs as root, a log kept across restarts (LogTail reads its
//     end). Run runs a set-up command (initdb, say) to its end; FreePorts
//     picks ports for a server that must be told its port.
//   - Eventually polls a condition until it holds or a deadline passes: what
//     a test waiting for a real process does instead of sleeping
//     (testing/synctest cannot fake the time of another process).
//
// Nothing here imports package testing, so that cmd/leafbench, which is not
// a test, can start its servers with it; MustStart takes the small TB
// interface that *testing.T satisfies.
//
// The other parts of a test's world have homes of their own: test databases
// (a fresh SQLite file, a MySQL database) in internal/testkit/testdb, the
// fault-injecting TCP proxy in internal/testkit/faultproxy, and real MariaDB Galera
// clusters in internal/testkit/galera.
package testenv
