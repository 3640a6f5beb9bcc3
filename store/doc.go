// Package store keeps leafd's state in a SQL database: Meituan Leaf's
// leaf_alloc table, leafd's leaf_worker and leafd_tag_highwater, in MySQL
// (and MariaDB, and engines that speak the same SQL), PostgreSQL, or an
// embedded SQLite file. Open returns a Store for the engine store.driver
// names; the server, the command line and the tests all open stores there.
//
// Every engine shares one implementation (the type db) of everything but
// opening the database, migrating it and sorting its errors. Opening never
// connects: a server whose database is down still starts, and every method
// reports a database it cannot reach as a store_unavailable *leafd.Error.
// A transaction that the database aborts so that it can be retried (a
// deadlock, a serialization failure, a Galera or Group Replication
// certification conflict, a TiDB write conflict, a busy SQLite file) is run
// again, whole, a few times with jittered backoff before that.
//
// A range is handed out only after its COMMIT returned success: whatever
// fails before that, including the COMMIT itself, yields no range.
//
// # What a backend must do
//
// An engine is a file of this package (mysql.go, postgres.go, sqlite.go)
// and a directory of migrations (migrations/<engine>/). What differs
// between engines lives there and nowhere else:
//
//   - Opening: parse and check the DSN without connecting (a DSN that does
//     not parse or names no database is an error that never shows the
//     password); force UTC on the session; bound the dial and a row-lock
//     wait to a few seconds, so that a locked row fails with an error that
//     names the lock inside the allocator's load timeout; size the pool.
//   - The db fields: the sqlx driver name that gives the engine's
//     placeholders (every statement is written with '?' and rebound by
//     db.q), nowMsSQL (the database's clock in Unix milliseconds, for the
//     worker leases), lockSuffix (what makes a SELECT lock the rows it
//     reads, "" where a transaction holds the whole database),
//     markByUpdate (how the high-water mark is raised: highwater.go), and
//     writers/retryFor for an engine with one writer at a time.
//   - Errors: the engine's rows in the error table (classify.go), which
//     sort its error codes into retry (the database rolled the transaction
//     back so that it is run again, whole, from its BEGIN), locked (a row
//     lock wait timed out), duplicate (a primary key was hit), unavailable
//     (with what went wrong and what to do) and other, and word them; a
//     classify function that finds the driver's errors there; and
//     MissingTable. The table is the behaviour: docs/compatibility.md
//     prints it, and a test compares the two.
//   - Migrate: the engine's migrations applied with goose, serialised
//     across servers by a lock of the engine (a named lock, or leafd's
//     lock row where the server refuses it; an advisory lock; a lock
//     file), each migration written to run again harmlessly and to leave
//     a Leaf database's rows as they are.
//   - Fallbacks (optional): the connector is built by openCluster, with a
//     probe that says whether a new connection's node accepts writes.
//
// The shared code asks of the engine's SQL only what the three engines
// agree on: an UPDATE whose row lock serialises the loads of one tag and
// whose RowsAffected counts the rows matched; a SELECT in the same
// transaction that sees that UPDATE; INSERT failing on a duplicate primary
// key; and COMMIT reporting whether it committed.
//
// # Adding an engine
//
//  1. Write migrations/<engine>/ with Leaf's column names and types that
//     hold 64-bit max_id, and embed them in package migrations.
//  2. Write <engine>.go: the Open function, the DSN check, classify and
//     Migrate, as above, and the engine's rows of the error table
//     (classify.go); register the engine in engines (open.go).
//  3. Give its entry in engines a name, an example DSN and claims, which
//     recognises the engine's DSNs by its driver's syntax (DSNKinds), so
//     that a DSN of another engine is refused and stops start-up.
//  4. Give internal/testdb a fresh database per test for it, and run
//     storetest.Run against it in <engine>_test.go, with the engine's own
//     tests of what storetest cannot reach (a locked row named as such, a
//     missing database, fallbacks); add it to the drivers of the segment
//     tests. CI must start the engine's server and require it.
//  5. Document it in docs/contract.md (drivers, connection rules, schema,
//     migration lock), docs/configuration.md and docs/compatibility.md
//     (LEAFD_TEST_UPDATE_DOCS=1 go test ./store -run TestErrorTableDocumented
//     prints the error table there).
//
// docs/stores.md says the same for contributors, with the reasons.
package store
