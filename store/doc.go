// Package store keeps leafd's state in a SQL database: Meituan Leaf's
// leaf_alloc table, leafd's leaf_worker and leafd_tag_highwater, in MySQL
// (and MariaDB, and engines that speak the same SQL), PostgreSQL, or an
// embedded SQLite file. Open returns a Store for the engine store.driver
// names; the server, the command line and the tests all open stores there.
//
// Every engine shares one implementation (the type db) of everything but
// reading its DSN, taking its migration lock and sorting its errors; what
// differs is the engine's dialect (package store/internal/engine), which
// the engine's own package (store/mysql, store/postgres, store/sqlite)
// registers from init; import store/all for all of them. Opening
// never connects: a server whose database is down still starts, and every
// method reports a database it cannot reach as a store_unavailable
// *leafd.Error. A transaction that the database aborts so that it can be
// retried (a deadlock, a serialization failure, a Galera or Group
// Replication certification conflict, a TiDB write conflict, a busy SQLite
// file) is run again, whole, a few times with jittered backoff before that.
//
// A range is handed out only after its COMMIT returned success: whatever
// fails before that, including the COMMIT itself, yields no range.
//
// The shared code asks of the engine's SQL only what the engines agree on:
// an UPDATE whose row lock serialises the loads of one tag and whose
// RowsAffected counts the rows matched; a SELECT in the same transaction
// that sees that UPDATE; INSERT failing on a duplicate primary key; and
// COMMIT reporting whether it committed. docs/stores.md says what every
// engine must guarantee, and under "Adding an engine" every file and edit
// a new one takes.
package store
