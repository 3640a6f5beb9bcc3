package postgres_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/leafd/leafd/store"
	_ "github.com/leafd/leafd/store/all" // the other engines, which must not read PostgreSQL's DSNs as theirs
)

// PostgreSQL recognises the DSNs written for it, as pgx reads them, and no
// other engine does.
func TestPostgresDSNKinds(t *testing.T) {
	for _, dsn := range []string{
		// libpq's keyword=value pairs, with spaces around '=' as libpq and
		// pgx accept them.
		"host = db1 port = 5432 user = leafd password = s3cret dbname = leaf",
		"host = h dbname = d",
		"dbname = leaf user = leafd",
		"host = 127.0.0.1 dbname = leafd",
		"host=/run/postgresql dbname=leafd",
		"postgres://u:pw@db/leaf",
		"host=db dbname=leaf user=u",
		"  dbname =leaf",
		"dbname=leaf",
		"user=leafd search_path=leaf",
		"host=db password='a b' dbname=leaf.db",
		"host=db password='unterminated",
		"postgres://u:p@db:5432/leaf",
		"postgresql://db/leaf?sslmode=require",
		"POSTGRES://db/leaf",
	} {
		if got := store.DSNKinds(dsn); !slices.Equal(got, []string{"postgres"}) {
			t.Errorf("DSNKinds(%q) = %q, want postgres alone", dsn, got)
		}
	}
}

// MaskDSN hides the passwords of PostgreSQL's DSNs, URLs and keyword=value
// pairs alike, as pgx reads them, and no part of them is left.
func TestPostgresMaskDSN(t *testing.T) {
	for dsn, want := range map[string]string{
		"postgres://u:secret@db:5432/leaf":                                    "postgres://u:***@db:5432/leaf",
		"postgres://u:secret@db":                                              "postgres://u:***@db",
		"postgres://u@db/leaf?sslmode=disable":                                "postgres://u@db/leaf?sslmode=disable",
		"postgresql://db/leaf?user=u&password=secret&sslpassword=k":           "postgresql://db/leaf?user=u&password=***&sslpassword=***",
		"host=db password=secret dbname=leaf":                                 "host=db password=*** dbname=leaf",
		"host=db password='a b\\'c' dbname=x":                                 "host=db password=*** dbname=x",
		"dbname=leaf password=secret":                                         "dbname=leaf password=***",
		"host = db1 port = 5432 user = leafd password = s3cret dbname = leaf": "host = db1 port = 5432 user = leafd password = *** dbname = leaf",
		"host=db password= secret":                                            "host=db password= ***",
		"host=db password='never ends":                                        "host=db password=***",
		"host=db sslpassword=k dbname=leaf":                                   "host=db sslpassword=*** dbname=leaf",
		// pgx ends the user and password at the first '@' before any '/':
		// '?' and '#' may be in the password.
		"postgres://u:se?cret@db/leaf":           "postgres://u:***@db/leaf",
		"postgres://u:se#cret@db/leaf?x=1":       "postgres://u:***@db/leaf?x=1",
		"postgresql://db/leaf?pass%77ord=secret": "postgresql://db/leaf?pass%77ord=***",
		// keyword=value pairs no engine reads (a misspelt first keyword)
		"ssl-mode=disable host=db password=secret": "ssl-mode=disable host=db password=***",
	} {
		if got := store.MaskDSN(dsn); got != want {
			t.Errorf("MaskDSN(%q) = %q, want %q", dsn, got, want)
		}
	}
	for _, c := range []struct{ dsn, secret string }{
		{"postgres://leafd@db:5432/leaf?password=hunter2@SuperSecretTail&sslrootcert=/etc/ssl/ca.pem", "hunter2@SuperSecretTail"},
		{"hostaddr=fe80::1 dbname=leaf password=ab@SuperSecretTail sslrootcert=/etc/ssl/ca.pem", "ab@SuperSecretTail"},
		{"postgresql://u:sec/ret@db/leaf", "sec/ret"},
		{`host=db password='it\'s @ secret' dbname=leaf`, `it\'s @ secret`},
		{"postgres://u:pa?ss@db/leaf?sslpassword=k3y", "pa?ss"},
		{"postgres://u:pa?ss@db/leaf?sslpassword=k3y", "k3y"},
	} {
		got := store.MaskDSN(c.dsn)
		for _, part := range strings.FieldsFunc(c.secret, func(r rune) bool { return strings.ContainsRune("@/' =?", r) }) {
			if len(part) > 2 && strings.Contains(got, part) {
				t.Errorf("MaskDSN(%q) = %q: %q of the secret is left", c.dsn, got, part)
			}
		}
	}
}

// A PostgreSQL DSN given to any other engine is refused by Open and
// CheckDSN, naming both engines and masking the password, as a first
// address or a fallback; an engine of files then creates nothing, where
// it would have served from a new file named after the DSN.
func TestOtherEnginesRefusePostgresDSN(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, driver := range store.Drivers() {
		if driver == "postgres" {
			continue
		}
		want := "is a PostgreSQL DSN, not a " + store.EngineName(driver) + " one"
		for _, dsn := range []string{"host = db1 port = 5432 user = leafd password = s3cret dbname = leaf", "host = db1 password = s3cret dbname = leaf"} {
			for name, f := range map[string]func() error{
				"Open":     func() error { _, err := store.Open(driver, dsn); return err },
				"CheckDSN": func() error { return store.CheckDSN(driver, dsn) },
			} {
				if err := f(); err == nil || !strings.Contains(err.Error(), want) || strings.Contains(err.Error(), "s3cret") {
					t.Errorf("%s(%s, %q): %v; want %q, without the password", name, driver, dsn, err, want)
				}
			}
		}
		if !store.HasAddresses(driver) {
			continue
		}
		if _, err := store.Open(driver, store.ExampleDSN(driver), store.WithFallbacks("host = b dbname = leaf")); err == nil ||
			!strings.Contains(err.Error(), "is a PostgreSQL DSN") {
			t.Errorf("a PostgreSQL fallback of a %s store: %v", driver, err)
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("a refused DSN left %s", e.Name())
	}
}
