package main

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"

	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

// errorsPassword is the password of the test's users; no output may show it.
const errorsPassword = "Cli-s3cret-pw"

// One-shot commands print what went wrong with the database and what to do
// about it: not that the database cannot be reached when it answers, and
// nothing of the buffers a server serves from. On every engine with a
// server.
func TestCommandsNameTheDatabaseError(t *testing.T) {
	for _, driver := range store.FallbackDrivers() { // the engines with accounts and a server to refuse them
		t.Run(driver, func(t *testing.T) { testCommandsNameTheDatabaseError(t, driver) })
	}
}

func testCommandsNameTheDatabaseError(t *testing.T, driver string) {
	dsn := testdb.DSN(t, driver)
	check := func(t *testing.T, dsn string, wantCode int, want []string, args ...string) string {
		t.Helper()
		code, out := runLeafd(t, t.TempDir(), []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsn}, args...)
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
		missing := "leafd_test_missing_" + randomHex()
		out := check(t, testdb.WithDatabase(t, driver, dsn, missing), 1, []string{"database " + missing + " does not exist",
			"create it with CREATE DATABASE " + missing}, "migrate")
		if strings.Contains(out, "cannot be reached") {
			t.Errorf("output %q blames the network", out)
		}
	})

	t.Run("TagAddAccessDenied", func(t *testing.T) {
		user := testdb.Account(t, driver, dsn, errorsPassword, testdb.Refused)
		check(t, testdb.WithLogin(t, driver, dsn, user, errorsPassword), 1,
			[]string{"refused the login", user, "check the user and password in store.dsn"}, "tag", "add", "order")
	})

	t.Run("TagListRefused", func(t *testing.T) {
		check(t, testdb.WithLogin(t, driver, testdb.WithAddr(t, driver, dsn, "127.0.0.1:1"), "leafd", errorsPassword), 1,
			[]string{"nothing accepts connections", "127.0.0.1:1", "check the address in store.dsn"}, "tag", "list")
	})
}

// leafd tag list runs no migration, so that a user without the privilege
// to create tables can list the tags; on a store never migrated it lists
// none and creates nothing. tag add still migrates (store.migrate is on by
// default). On every engine with accounts.
func TestTagListDoesNotMigrate(t *testing.T) {
	for _, driver := range store.FallbackDrivers() { // the engines with accounts
		t.Run(driver, func(t *testing.T) { testTagListDoesNotMigrate(t, driver) })
	}
}

func testTagListDoesNotMigrate(t *testing.T, driver string) {
	dsn := testdb.DSN(t, driver)
	reader := testdb.WithLogin(t, driver, dsn, testdb.Account(t, driver, dsn, errorsPassword, testdb.Reader), errorsPassword)
	readerEnv := []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + reader, "LEAFD_STORE_MIGRATE=true"}

	// Never migrated: no tags, and no table made.
	code, out := runLeafd(t, t.TempDir(), readerEnv, "tag", "list")
	if code != 0 || !strings.Contains(out, "no tags") || !strings.Contains(out, "leafd migrate") {
		t.Fatalf("leafd tag list on a store never migrated: exit %d, output %q", code, out)
	}
	if tables := testdb.Tables(t, driver, dsn); len(tables) != 0 {
		t.Fatalf("leafd tag list made the tables %q", tables)
	}

	// tag add migrates, as the owner; the reader then lists without DDL.
	ownerEnv := []string{"LEAFD_STORE_DRIVER=" + driver, "LEAFD_STORE_DSN=" + dsn}
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

func randomHex() string {
	var b [4]byte
	_, _ = rand.Read(b[:])
	return hex.EncodeToString(b[:])
}
