// Package e2e is leafd's end-to-end fault-injection suite. It builds the
// real leafd binary, runs several leafd processes on loopback ports against
// a real MariaDB or MySQL database reached through a fault-injecting TCP
// proxy (internal/testkit/faultproxy), puts them under concurrent load from many
// HTTP clients, injects faults (kill -9, graceful restarts, the database
// unreachable, slow, restarted or partitioned from one server, bad input at
// volume) and checks every ID it received against the guarantees of
// docs/contract.md section 2.
//
// The tests are off unless LEAFD_E2E names a profile, so that go test ./...
// stays fast:
//
//	LEAFD_E2E=short go test -count=1 -timeout 10m ./e2e/    # every scenario briefly (CI)
//	LEAFD_E2E=long  go test -count=1 -timeout 60m ./e2e/    # longer phases, more cycles
//
// Other settings:
//
//	LEAFD_E2E_RACE=1               build leafd with the race detector; a data race
//	                               reported by any leafd process fails the scenario
//	LEAFD_E2E_REPORT=FILE          also write the results table as Markdown to FILE
//	LEAFD_E2E_BIN=PATH             test this leafd binary instead of building one
//	                               (a release build, say)
//	LEAFD_TEST_MYSQL_DSN=...       the database server (see internal/testkit/testdb); the
//	                               suite fails, rather than skips, without one
//	LEAFD_TEST_REQUIRE_GALERA=1    fail, rather than skip, the Galera scenarios (7a-7e)
//	                               when galera-4 and rsync are not installed
//	LEAFD_TEST_REQUIRE_HAPROXY=1   fail, rather than skip, scenarios 7d, 7e and 12b when
//	                               Debian's haproxy is not installed
//	LEAFD_TEST_REQUIRE_PATRONI=1   fail, rather than skip, scenarios 12a and 12b when
//	                               Debian's patroni and etcd-server are not installed
//
// Scenario 8 runs three servers over a PostgreSQL server of its own
// (internal/testkit/pgserver, Debian's postgresql package; required once the suite
// is on), kills one with kill -9, and crashes and restarts the database
// itself under load. Scenario 9 runs three servers with store.shards over
// three independent MariaDB servers of its own (internal/testkit/galera,
// standalone), kills one database and moves a slot under load.
//
// The Galera scenarios start a real 3-node MariaDB Galera cluster on
// loopback (internal/testkit/galera), shared by them, and run one leafd per node with
// the other nodes as store.fallback_dsns: steady load with cross-node
// certification conflicts, a node killed with kill -9 and rejoining, and
// snowflake servers leasing worker ids through every node at once. Scenarios
// 7d and 7e put a real HAProxy (internal/testkit/haproxy) in front of the same
// cluster and give leafd its address only: the node behind it killed with
// kill -9 and rejoining, and HAProxy itself killed and restarted. Only them:
//
//	LEAFD_E2E=short LEAFD_TEST_REQUIRE_GALERA=1 go test -count=1 -run Galera -v ./e2e/
//	LEAFD_E2E=short LEAFD_TEST_REQUIRE_GALERA=1 LEAFD_TEST_REQUIRE_HAPROXY=1 go test -count=1 -run HAProxy -v ./e2e/
//
// Scenarios 12a and 12b (TestPatroni, TestPatroniBehindProxy) run three servers
// over a real three-node PostgreSQL cluster under Patroni, with etcd, of
// their own (internal/testkit/patroni): through a multi-host URL with
// target_session_attrs=read-write, and through HAProxy checking Patroni's
// GET /primary. The primary is killed with kill -9 and a switchover is
// asked for under load. Only them:
//
//	LEAFD_E2E=short LEAFD_TEST_REQUIRE_PATRONI=1 LEAFD_TEST_REQUIRE_HAPROXY=1 go test -count=1 -run Patroni -v ./e2e/
//
// Scenario 11 (TestRandomOperations) runs a seeded random sequence of
// operator actions and faults on SQLite, MariaDB, PostgreSQL and
// store.shards under load and checks every ID for duplicates after each
// step; it prints its seed:
//
//	LEAFD_E2E_SEED=N               replay the sequences of seed N
//	LEAFD_E2E_ACTIONS=a,b or -a,-b choose only among these actions, or among
//	                               all but these
//
// Each scenario uses a database of its own and stops every process it
// started.
package e2e
