// Package testkit is the root of leafd's test infrastructure, kept apart
// from the production packages: nothing outside tests, e2e/ and
// cmd/leafbench imports anything under it.
//
//   - testenv: the one process harness (start, stop, kill -9, output,
//     free ports, waiting), and the leafd runner built on it.
//   - testdb: a fresh database per test on each engine, and Each, which
//     runs a test on every engine store.Drivers names.
//   - pgserver, galera, haproxy, patroni: PostgreSQL, MariaDB Galera,
//     HAProxy servers and a PostgreSQL cluster under Patroni of a test's
//     own, which it can crash, fail over and restart.
//   - faultproxy: a TCP proxy that cuts, stalls or delays connections.
//   - faultdriver: a database/sql driver over an engine's own that answers
//     a chosen error at a chosen step of a store's transactions.
package testkit
