package store_test

import (
	"os"
	"strings"
	"testing"

	"github.com/leafd/leafd/store"
)

// Each engine recognises the DSNs written for it, as its driver reads them;
// a DSN two engines read is left to store.driver.
func TestDSNKinds(t *testing.T) {
	tests := map[string]string{
		// libpq's keyword=value pairs, with spaces around '=' as libpq and
		// pgx accept them.
		"host = db1 port = 5432 user = leafd password = s3cret dbname = leaf": "postgres",
		"host = h dbname = d":                   "postgres",
		"host=db dbname=leaf user=u":            "postgres",
		"  dbname =leaf":                        "postgres",
		"dbname=leaf":                           "postgres",
		"user=leafd search_path=leaf":           "postgres",
		"host=db password='a b' dbname=leaf.db": "postgres",
		"host=db password='unterminated":        "postgres",
		"postgres://u:p@db:5432/leaf":           "postgres",
		"postgresql://db/leaf?sslmode=require":  "postgres",
		"POSTGRES://db/leaf":                    "postgres",

		"root@tcp(127.0.0.1:3306)/leafd":                "mysql",
		"u:p@unix(/tmp/mysql.sock)/leaf":                "mysql",
		"tcp(db:3306)/leaf":                             "mysql",
		"u@/leaf":                                       "mysql",
		"MYSQL://u@db/leaf":                             "mysql",
		"user:pass@tcp(db:3306)/leaf?parseTime":         "mysql",
		"user:pass@tcp(db:3306)/leaf?parseTime=perhaps": "mysql",
		"u:p w=x@tcp(db)/leaf.db":                       "mysql",

		"file:data/leafd.db":                "sqlite",
		"file:leafd?mode=rwc":               "sqlite",
		"file:x.db?_pragma=foreign_keys(1)": "sqlite",
		":memory:":                          "sqlite",
		"data/leafd.db":                     "sqlite",
		"/leafd.db":                         "sqlite",
		"/var/lib/leafd.SQLITE?_pragma=x":   "sqlite",
		"data/leafd.db?_txlock=deferred":    "sqlite",
		"leafd.db3":                         "sqlite",

		"tcp/leaf.db": "mysql sqlite", // a MySQL DSN, or a path: store.driver says which

		"leafd":      "",
		"":           "",
		"not a dsn":  "",
		"data/leafd": "",
		"/leaf":      "",
	}
	for dsn, want := range tests {
		if got := strings.Join(store.DSNKinds(dsn), " "); got != want {
			t.Errorf("DSNKinds(%q) = %q, want %q", dsn, got, want)
		}
	}
}

func TestMaskDSN(t *testing.T) {
	tests := map[string]string{
		"root:secret@tcp(db:3306)/leaf":                                       "root:***@tcp(db:3306)/leaf",
		"root:p@ss:w/rd@tcp(db:3306)/leaf?x=1":                                "root:***@tcp(db:3306)/leaf?x=1",
		"root@tcp(db:3306)/leaf":                                              "root@tcp(db:3306)/leaf",
		"root:@tcp(db:3306)/leaf":                                             "root:@tcp(db:3306)/leaf",
		"mysql://u:secret@db:3306/leaf":                                       "mysql://u:***@db:3306/leaf",
		"file:data/leafd.db":                                                  "file:data/leafd.db",
		"u:pw@/leaf":                                                          "u:***@/leaf",
		"leafd:secret@unix(/run/my.sock)/leafd":                               "leafd:***@unix(/run/my.sock)/leafd",
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
		"root=x:secret@tcp(db:3306)/leaf":                                     "root=x:***@tcp(db:3306)/leaf",
		// pgx ends the user and password at the first '@' before any '/':
		// '?' and '#' may be in the password.
		"postgres://u:se?cret@db/leaf":           "postgres://u:***@db/leaf",
		"postgres://u:se#cret@db/leaf?x=1":       "postgres://u:***@db/leaf?x=1",
		"postgresql://db/leaf?pass%77ord=secret": "postgresql://db/leaf?pass%77ord=***",
		// keyword=value pairs no engine reads (a misspelt first keyword)
		"ssl-mode=disable host=db password=secret": "ssl-mode=disable host=db password=***",
	}
	for dsn, want := range tests {
		if got := store.MaskDSN(dsn); got != want {
			t.Errorf("MaskDSN(%q) = %q, want %q", dsn, got, want)
		}
	}
}

// A DSN written for another engine is refused by Open and CheckDSN, naming
// both engines and masking the password; the SQLite driver then creates
// nothing, where it would have served from a new file named after the DSN.
func TestOpenRefusesAnotherEnginesDSN(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, c := range []struct{ driver, dsn, want string }{
		{"sqlite", "host = db1 port = 5432 user = leafd password = s3cret dbname = leaf", "is a PostgreSQL DSN, not a SQLite one"},
		{"sqlite", "root:s3cret@tcp(127.0.0.1:3306)/leafd", "is a MySQL DSN, not a SQLite one"},
		{"mysql", "host = db1 password = s3cret dbname = leaf", "is a PostgreSQL DSN, not a MySQL one"},
		{"postgres", "file:data/leafd.db", "is a SQLite DSN, not a PostgreSQL one"},
		{"postgres", "root:s3cret@tcp(db:3306)/leaf", "is a MySQL DSN, not a PostgreSQL one"},
	} {
		for name, f := range map[string]func() error{
			"Open":     func() error { _, err := store.Open(c.driver, c.dsn); return err },
			"CheckDSN": func() error { return store.CheckDSN(c.driver, c.dsn) },
		} {
			if err := f(); err == nil || !strings.Contains(err.Error(), c.want) || strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s(%s, %q): %v; want %q, without the password", name, c.driver, c.dsn, err, c.want)
			}
		}
	}
	if _, err := store.Open("mysql", "root@tcp(a:3306)/leaf", store.WithFallbacks("host = b dbname = leaf")); err == nil ||
		!strings.Contains(err.Error(), "is a PostgreSQL DSN") {
		t.Errorf("a PostgreSQL fallback of a MySQL store: %v", err)
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("a refused DSN left %s", e.Name())
	}
}

// A DSN that no engine reads as its own but that has the shape of another
// database's address (a URL other than file:, or user:password@host) is
// not a SQLite path either: it is refused, with its password masked,
// where SQLite would have served from a new file in a directory named
// after the password. A path meant that way can be written as a file: URI.
func TestSQLiteRefusesAnAddress(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, dsn := range []string{
		"root:s3cret@localhost:3306/leaf", // MySQL without tcp(…)
		"root@db:3306/leaf",
		"root@localhost/leaf",          // user@host/database
		"postgress://u:s3cret@db/leaf", // a misspelt scheme
		"postgresql:/u:s3cret@db/leaf",
		"mysql:/root:s3cret@db/leaf",
		"ssl-mode=disable host=db password=s3cret dbname=leaf", // keyword=value pairs with a misspelt first keyword
		"\u00a0host=db password=s3cret dbname=leaf",
		"file://root:s3cret@db/leaf", // a file: URI's host is refused too
	} {
		for name, f := range map[string]func() error{
			"Open":     func() error { _, err := store.Open("sqlite", dsn); return err },
			"CheckDSN": func() error { return store.CheckDSN("sqlite", dsn) },
		} {
			if err := f(); err == nil || !strings.Contains(err.Error(), "not a file's path") && !strings.Contains(err.Error(), "names a host") ||
				strings.Contains(err.Error(), "s3cret") {
				t.Errorf("%s(sqlite, %q): %v; want it refused as an address, without the password", name, dsn, err)
			}
		}
	}
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	for _, e := range entries {
		t.Errorf("a refused DSN left %s", e.Name())
	}
	for _, dsn := range []string{"data/leafd@blue/leafd.db", "./leafd@blue/leafd.db", "/leafd@blue/leafd.db", "data/10:30/leafd.db", "file:odd/u:p@h/leafd.db",
		"data/a=b/leafd.db", "data/my leafd.db"} {
		if err := store.CheckDSN("sqlite", dsn); err != nil {
			t.Errorf("CheckDSN(sqlite, %q): %v", dsn, err)
		}
	}
}

// MaskDSN hides every secret that any engine's driver could read in a DSN,
// whichever engine it is written for, also where the engines read it
// differently: no part of the secret is left.
func TestMaskDSNHidesEverySecret(t *testing.T) {
	for _, c := range []struct{ dsn, secret string }{
		{"postgres://leafd@db:5432/leaf?password=hunter2@SuperSecretTail&sslrootcert=/etc/ssl/ca.pem", "hunter2@SuperSecretTail"},
		{"hostaddr=fe80::1 dbname=leaf password=ab@SuperSecretTail sslrootcert=/etc/ssl/ca.pem", "ab@SuperSecretTail"},
		{"postgresql://u:sec/ret@db/leaf", "sec/ret"},
		{"root:p=w x@tcp(db)/leaf", "p=w x"},
		{"mysql://root:s3cr3t@db:3306/leaf", "s3cr3t"},
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
