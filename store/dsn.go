package store

import (
	"cmp"
	"fmt"
	"slices"
	"strings"

	"github.com/leafd/leafd/store/internal/engine"
)

// DSNKinds returns the engines, by store.driver name and sorted, that
// read dsn as written for them; none when no engine does. It exists so
// that a DSN given to the wrong driver stops start-up: the SQLite driver
// takes anything for a path, and would serve from a new file named after a
// PostgreSQL DSN (its password in the name) or in a directory named
// root@tcp(127.0.0.1:3306). Each engine judges by its own syntax
// (its dialect's Claims); a DSN two engines read, such as
// tcp/leaf.db, is left to store.driver.
func DSNKinds(dsn string) []string {
	var kinds []string
	for _, name := range Drivers() {
		if lookup(name).Claims(dsn) {
			kinds = append(kinds, name)
		}
	}
	return kinds
}

// EngineName returns the name of driver's engine as messages say it:
// "MySQL", "PostgreSQL", "SQLite"; driver itself when it is unknown.
func EngineName(driver string) string {
	if d, ok := engine.Lookup(driver); ok {
		return d.Title
	}
	return driver
}

// ExampleDSN returns the shape of a DSN of driver's engine, as messages
// suggest it; "" when driver is unknown.
func ExampleDSN(driver string) string {
	if d, ok := engine.Lookup(driver); ok {
		return d.Example
	}
	return ""
}

// OtherEngine returns the engine, by store.driver name, that dsn is
// written for when driver's does not read it as its own (DSNKinds); ""
// otherwise, and when driver is unknown. Open and config refuse such a DSN.
func OtherEngine(driver, dsn string) string {
	kinds := DSNKinds(dsn)
	if _, ok := engine.Lookup(driver); !ok || len(kinds) == 0 || slices.Contains(kinds, driver) {
		return ""
	}
	return kinds[0]
}

// foreignDSN returns the error Open returns for a DSN written for another
// engine (OtherEngine), or nil.
func foreignDSN(driver, dsn string) error {
	kind := OtherEngine(driver, dsn)
	if kind == "" {
		return nil
	}
	return fmt.Errorf("%q is a %s DSN, not a %s one: set store.driver to %s, or give a %s DSN such as %s",
		MaskDSN(dsn), EngineName(kind), EngineName(driver), kind, EngineName(driver), ExampleDSN(driver))
}

// MaskDSN returns dsn with its password replaced by "***", for messages
// and logs: root:secret@tcp(db:3306)/leaf becomes
// root:***@tcp(db:3306)/leaf, postgres://u:secret@db/leaf?sslpassword=x
// becomes postgres://u:***@db/leaf?sslpassword=***, and password = secret
// in libpq's keyword=value pairs becomes password = ***. A DSN without a
// password is returned as it is. One that both PostgreSQL and MySQL could
// read (root=x:pw@tcp(db)/leaf) is masked both ways, and so is one that
// has the shape of keyword=value pairs although PostgreSQL would not read
// it (ssl-mode=disable host=db password=secret): a message may quote it.
func MaskDSN(dsn string) string {
	var spans [][2]int
	for _, name := range Drivers() {
		spans = append(spans, lookup(name).Secrets(dsn)...)
	}
	slices.SortFunc(spans, func(a, b [2]int) int { return cmp.Compare(a[0], b[0]) })
	var b strings.Builder
	last := 0
	for i := 0; i < len(spans); {
		from, to := spans[i][0], spans[i][1]
		for i++; i < len(spans) && spans[i][0] <= to; i++ {
			to = max(to, spans[i][1])
		}
		if from < last { // within the range just hidden
			from = last
		}
		b.WriteString(dsn[last:from])
		b.WriteString("***")
		last = max(last, to)
	}
	b.WriteString(dsn[last:])
	return b.String()
}
