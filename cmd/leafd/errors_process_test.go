package main

import (
	"crypto/rand"
	"database/sql"
	"encoding/hex"
	"fmt"
	"strings"
	"testing"

	"github.com/go-sql-driver/mysql"

	"github.com/leafd/leafd/internal/testkit/testdb"
)

// errorsPassword is the password of the test's users; no output may show it.
const errorsPassword = "Cli-s3cret-pw"

// One-shot commands print what went wrong with the database and what to do
// about it: not that the database cannot be reached when it answers, and
// nothing of the buffers a server serves from.
func TestCommandsNameTheDatabaseError(t *testing.T) {
	cfg, err := mysql.ParseDSN(testdb.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	check := func(t *testing.T, dsn string, wantCode int, want []string, args ...string) string {
		t.Helper()
		code, out := runLeafd(t, t.TempDir(), []string{"LEAFD_STORE_DRIVER=mysql", "LEAFD_STORE_DSN=" + dsn}, args...)
		if code != wantCode {
			t.Errorf("leafd %s: exit %d, want %d; output %q", strings.Join(args, " "), code, wantCode, out)
		}
		for _, w := range want {
			if !strings.Contains(out, w) {
				t.Errorf("leafd %s: output %q does not say %q", strings.Join(args, " "), out, w)
			}
		}
		for _, never := range []string{errorsPassword, "served from buffers"} {
			if strings.Contains(out, never) {
				t.Errorf("leafd %s: output %q holds %q", strings.Join(args, " "), out, never)
			}
		}
		return out
	}

	t.Run("MigrateUnknownDatabase", func(t *testing.T) {
		missing := cfg.Clone()
		missing.DBName = "leafd_test_missing_" + randomHex()
		out := check(t, missing.FormatDSN(), 1, []string{"database " + missing.DBName + " does not exist",
			"create it with CREATE DATABASE " + missing.DBName}, "migrate")
		if strings.Contains(out, "cannot be reached") {
			t.Errorf("output %q blames the network", out)
		}
	})

	t.Run("TagAddAccessDenied", func(t *testing.T) {
		admin := openAdmin(t, cfg)
		user := "leafd_cli_" + randomHex()
		execOrFail(t, admin, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY 'right-%s'", user, errorsPassword))
		t.Cleanup(func() { _, _ = admin.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user)) })
		wrong := cfg.Clone()
		wrong.User, wrong.Passwd = user, errorsPassword
		check(t, wrong.FormatDSN(), 1, []string{"refused the login", user, "check the user and password in store.dsn"}, "tag", "add", "order")
	})

	t.Run("TagListRefused", func(t *testing.T) {
		check(t, "leafd:"+errorsPassword+"@tcp(127.0.0.1:1)/leafd?timeout=500ms", 1,
			[]string{"nothing accepts connections", "127.0.0.1:1", "check the address in store.dsn"}, "tag", "list")
	})
}

// leafd tag list runs no migration, so that a user without the privilege
// to create tables can list the tags; on a store never migrated it lists
// none and creates nothing. tag add still migrates (store.migrate is on by
// default).
func TestTagListDoesNotMigrate(t *testing.T) {
	cfg, err := mysql.ParseDSN(testdb.MySQL(t))
	if err != nil {
		t.Fatal(err)
	}
	admin := openAdmin(t, cfg)
	user := "leafd_ro_" + randomHex()
	execOrFail(t, admin, fmt.Sprintf("CREATE USER '%s'@'%%' IDENTIFIED BY '%s'", user, errorsPassword))
	t.Cleanup(func() { _, _ = admin.Exec(fmt.Sprintf("DROP USER IF EXISTS '%s'@'%%'", user)) })
	execOrFail(t, admin, fmt.Sprintf("GRANT SELECT ON %s.* TO '%s'@'%%'", cfg.DBName, user))
	reader := cfg.Clone()
	reader.User, reader.Passwd = user, errorsPassword
	readerEnv := []string{"LEAFD_STORE_DRIVER=mysql", "LEAFD_STORE_DSN=" + reader.FormatDSN(), "LEAFD_STORE_MIGRATE=true"}

	// Never migrated: no tags, and no table made.
	code, out := runLeafd(t, t.TempDir(), readerEnv, "tag", "list")
	if code != 0 || !strings.Contains(out, "no tags") || !strings.Contains(out, "leafd migrate") {
		t.Fatalf("leafd tag list on a store never migrated: exit %d, output %q", code, out)
	}
	var tables int
	if err := admin.QueryRow("SELECT COUNT(*) FROM information_schema.tables WHERE table_schema = ?", cfg.DBName).Scan(&tables); err != nil {
		t.Fatal(err)
	}
	if tables != 0 {
		t.Fatalf("leafd tag list made %d tables", tables)
	}

	// tag add migrates, as the owner; the reader then lists without DDL.
	ownerEnv := []string{"LEAFD_STORE_DRIVER=mysql", "LEAFD_STORE_DSN=" + cfg.FormatDSN()}
	if code, out := runLeafd(t, t.TempDir(), ownerEnv, "tag", "add", "order", "--step", "50"); code != 0 {
		t.Fatalf("leafd tag add: exit %d, output %q", code, out)
	}
	code, out = runLeafd(t, t.TempDir(), readerEnv, "tag", "list")
	if code != 0 || !strings.Contains(out, "order") || strings.Contains(out, "migrate") {
		t.Fatalf("leafd tag list as a user who may only SELECT: exit %d, output %q", code, out)
	}
	// The same user cannot add one, and is told why.
	if code, out := runLeafd(t, t.TempDir(), readerEnv, "tag", "add", "pay"); code != 1 || !strings.Contains(out, "denied") {
		t.Fatalf("leafd tag add as a user who may only SELECT: exit %d, output %q; want exit 1, denied", code, out)
	}
}

func openAdmin(t *testing.T, cfg *mysql.Config) *sql.DB {
	t.Helper()
	db, err := sql.Open("mysql", cfg.FormatDSN())
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { db.Close() })
	return db
}

func execOrFail(t *testing.T, db *sql.DB, query string) {
	t.Helper()
	if _, err := db.Exec(query); err != nil {
		t.Fatalf("%s: %v", query, err)
	}
}

func randomHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
