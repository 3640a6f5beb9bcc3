package pgserver_test

import (
	"database/sql"
	"testing"

	"github.com/leafd/leafd/internal/testkit/testenv"

	_ "github.com/jackc/pgx/v5/stdlib"

	"github.com/leafd/leafd/internal/testkit/pgserver"
)

// A server of the test's own keeps what was committed across a crash.
func TestCrashKeepsCommitted(t *testing.T) {
	testenv.Slow(t)
	s := pgserver.Start(t)
	if err := s.CreateDatabase("leafd"); err != nil {
		t.Fatal(err)
	}
	db, err := sql.Open("pgx", s.DSN("leafd"))
	if err != nil {
		t.Fatal(err)
	}
	defer db.Close()
	if _, err := db.Exec("CREATE TABLE t (n BIGINT); INSERT INTO t VALUES (42)"); err != nil {
		t.Fatal(err)
	}
	if err := s.Crash(); err != nil {
		t.Fatal(err)
	}
	if err := db.Ping(); err == nil {
		t.Fatal("the server answers after its crash")
	}
	if err := s.Start(); err != nil {
		t.Fatal(err)
	}
	var n int64
	if err := db.QueryRow("SELECT n FROM t").Scan(&n); err != nil || n != 42 {
		t.Fatalf("after the restart: %d, %v; want the committed 42", n, err)
	}
}
