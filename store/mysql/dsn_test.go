package mysql_test

import (
	"os"
	"slices"
	"strings"
	"testing"

	"github.com/leafd/leafd/store"
	_ "github.com/leafd/leafd/store/all" // the other engines, which must not read MySQL's DSNs as theirs
)

// MySQL recognises the DSNs written for it, as its driver reads them, and
// no other engine does; a DSN that another engine reads too is left to
// store.driver.
func TestMySQLDSNKinds(t *testing.T) {
	for _, dsn := range []string{
		"root@tcp(127.0.0.1:3306)/leafd",
		"u:p@unix(/tmp/mysql.sock)/leaf",
		"tcp(db:3306)/leaf",
		"u@/leaf",
		"MYSQL://u@db/leaf",
		"mysql://u@db/leaf",
		"u:pw@unix(/run/mysqld.sock)/leaf",
		"user:pass@tcp(db:3306)/leaf?parseTime",
		"user:pass@tcp(db:3306)/leaf?parseTime=perhaps",
		"u:p w=x@tcp(db)/leaf.db",
	} {
		if got := store.DSNKinds(dsn); !slices.Equal(got, []string{"mysql"}) {
			t.Errorf("DSNKinds(%q) = %q, want mysql alone", dsn, got)
		}
	}
	// A MySQL DSN, or a path for an engine of files: store.driver says which.
	const both = "tcp/leaf.db"
	if got := store.DSNKinds(both); !slices.Contains(got, "mysql") || len(got) != 2 {
		t.Errorf("DSNKinds(%q) = %q, want mysql and the engine of files", both, got)
	}
	if other := store.OtherEngine("mysql", both); other != "" {
		t.Errorf("OtherEngine(mysql, %q) = %q, want none: the DSN is MySQL's too", both, other)
	}
	// A name alone is a database name to MySQL: left to store.driver.
	if other := store.OtherEngine("mysql", "leafd"); other != "" {
		t.Errorf("OtherEngine(mysql, leafd) = %q, want none", other)
	}
}

// MaskDSN hides the password of MySQL's DSNs, in every shape the driver
// reads, and no part of it is left.
func TestMySQLMaskDSN(t *testing.T) {
	for dsn, want := range map[string]string{
		"root:secret@tcp(db:3306)/leaf":         "root:***@tcp(db:3306)/leaf",
		"root:p@ss:w/rd@tcp(db:3306)/leaf?x=1":  "root:***@tcp(db:3306)/leaf?x=1",
		"root@tcp(db:3306)/leaf":                "root@tcp(db:3306)/leaf",
		"root:@tcp(db:3306)/leaf":               "root:@tcp(db:3306)/leaf",
		"mysql://u:secret@db:3306/leaf":         "mysql://u:***@db:3306/leaf",
		"u:pw@/leaf":                            "u:***@/leaf",
		"leafd:secret@unix(/run/my.sock)/leafd": "leafd:***@unix(/run/my.sock)/leafd",
		// Another engine could read it too (a keyword root): masked both ways.
		"root=x:secret@tcp(db:3306)/leaf": "root=x:***@tcp(db:3306)/leaf",
	} {
		if got := store.MaskDSN(dsn); got != want {
			t.Errorf("MaskDSN(%q) = %q, want %q", dsn, got, want)
		}
	}
	for _, c := range []struct{ dsn, secret string }{
		{"root:p=w x@tcp(db)/leaf", "p=w x"},
		{"mysql://root:s3cr3t@db:3306/leaf", "s3cr3t"},
	} {
		got := store.MaskDSN(c.dsn)
		for _, part := range strings.FieldsFunc(c.secret, func(r rune) bool { return strings.ContainsRune("@/' =?", r) }) {
			if len(part) > 2 && strings.Contains(got, part) {
				t.Errorf("MaskDSN(%q) = %q: %q of the secret is left", c.dsn, got, part)
			}
		}
	}
}

// A MySQL DSN given to any other engine is refused by Open and CheckDSN,
// naming both engines and masking the password, as a first address or a
// fallback; an engine of files then creates nothing, where it would have
// served from a new file named after the DSN.
func TestOtherEnginesRefuseMySQLDSN(t *testing.T) {
	dir := t.TempDir()
	t.Chdir(dir)
	for _, driver := range store.Drivers() {
		if driver == "mysql" {
			continue
		}
		want := "is a MySQL DSN, not a " + store.EngineName(driver) + " one"
		for _, dsn := range []string{"root:s3cret@tcp(127.0.0.1:3306)/leafd", "root:s3cret@tcp(db:3306)/leaf"} {
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
		if _, err := store.Open(driver, store.ExampleDSN(driver), store.WithFallbacks("root@tcp(b:3306)/leaf")); err == nil ||
			!strings.Contains(err.Error(), "is a MySQL DSN") {
			t.Errorf("a MySQL fallback of a %s store: %v", driver, err)
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
