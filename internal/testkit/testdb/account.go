package testdb

import (
	"crypto/rand"
	"encoding/hex"
	"strings"
	"testing"
)

// AccountKind is what an account Account creates may do.
type AccountKind int

const (
	// Refused is an account that exists on the server but that the server
	// refuses to log in with the password given to Account: on MySQL its
	// password is another one, on PostgreSQL it is a role that may not log
	// in.
	Refused AccountKind = iota + 1
	// Reader is an account that logs in with the password given to Account
	// and may read the tables of the database, those there and those the
	// test's own account makes later, but make none nor change any.
	Reader
)

// Account creates an account of kind on the server of the database dsn of
// engine driver, an engine with accounts (one reached at network
// addresses), and returns its name, leafd_test_user_<8 hex digits>; the
// account is dropped when the test ends. Log in as it with WithLogin and
// the password. It fails the test for an engine without accounts.
func Account(tb testing.TB, driver, dsn, password string, kind AccountKind) (user string) {
	tb.Helper()
	e := lookup(driver)
	if e.account == nil {
		tb.Fatalf("engine %s has no accounts", driver)
	}
	var b [4]byte
	_, _ = rand.Read(b[:])
	user = "leafd_test_user_" + hex.EncodeToString(b[:])
	create, drop, err := e.account(dsn, user, password, kind)
	if err != nil {
		tb.Fatalf("%s account: %v", driver, err)
	}
	db := SQL(tb, driver, dsn)
	for i, q := range create {
		if _, err := db.Exec(q); err != nil {
			tb.Fatalf("create the test account %s: %s: %v", user, q, err)
		}
		if i == 0 { // the account itself: it goes whatever follows
			tb.Cleanup(func() {
				for _, q := range drop {
					if _, err := db.Exec(q); err != nil {
						tb.Errorf("drop the test account %s: %s: %v", user, q, err)
					}
				}
			})
		}
	}
	return user
}

// sqlString is s as a string literal of SQL.
func sqlString(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }
