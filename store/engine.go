package store

import (
	"io/fs"
	"slices"
	"time"

	"github.com/pressly/goose/v3"
)

// A dialect is one engine of store.driver: everything engine-specific that
// the shared code asks of it. Each engine's file declares one and
// registers it; nothing else lists the engines.
type dialect struct {
	// driver is store.driver's name for it; title its name in messages;
	// example the shape of its DSN, as messages suggest it.
	driver, title, example string
	// claims reports whether dsn is written for the engine, as its driver
	// reads it (DSNKinds); check returns Open's error for dsn without
	// opening anything; open opens a store of it.
	claims func(dsn string) bool
	check  func(dsn string) error
	open   func(d *dialect, dsn string, o options) (Node, error)
	// noFallbacks says why store.fallback_dsns does not apply; "" where it
	// does.
	noFallbacks string

	// rows are the engine's rows of the error table (classify.go), which
	// classify looks its driver's errors up in.
	rows     []errorRule
	classify func(error) verdict
	// refused reports whether err came from a node that answered (and
	// refuses to serve): a store with fallback addresses then leaves it.
	refused func(err error) bool
	// missingTable reports whether err says that a table does not exist.
	missingTable func(err error) bool

	// The migrations, applied with goose in this dialect.
	goose      goose.Dialect
	migrations fs.FS

	// oneWriter lets one writing transaction of a store run at a time:
	// SQLite takes one writer per file anyway, and waiting here is fairer
	// and cheaper than in its busy handler. retryFor, when positive,
	// replaces the bound of maxAttempts: a transaction aborted for a retry
	// is tried again until this much time has passed since it began.
	oneWriter bool
	retryFor  time.Duration

	// nowMs is the database's clock in Unix milliseconds; lockSuffix what
	// makes a SELECT lock the rows it reads, and shareSuffix take a shared
	// lock on them ("" where a transaction holds the whole database);
	// greatest the function of the larger of two values.
	nowMs, lockSuffix, shareSuffix, greatest string
	// claimLock, when set, is run first in a worker id's claim to
	// serialise the claims of all servers: PostgreSQL takes no gap locks,
	// so claims that both find worker id n free would otherwise both
	// insert it, and all but one retry, again and again while many servers
	// start at once. (MySQL's locking read of the range takes gap locks
	// that serialise them; SQLite's transaction holds the file.)
	claimLock string
	// markByUpdate: a tag's high-water mark is raised by making sure its
	// row exists, locking it, and updating it (MySQL, where an upsert's
	// gap locks would deadlock loads of different tags); otherwise by one
	// INSERT … ON CONFLICT (highwater.go).
	markByUpdate bool
}

// engines are the registered engines by store.driver name.
var engines = map[string]*dialect{}

// register adds an engine; each engine's file calls it from init.
func register(d *dialect) {
	if engines[d.driver] != nil {
		panic("store: engine " + d.driver + " registered twice")
	}
	engines[d.driver] = d
}

// Drivers returns the names store.driver accepts, sorted.
func Drivers() []string {
	names := make([]string, 0, len(engines))
	for name := range engines {
		names = append(names, name)
	}
	slices.Sort(names)
	return names
}

// errorRows is the error table: every engine's rows, engines in Drivers
// order, each row naming its engine.
func errorRows() []errorRule {
	var rows []errorRule
	for _, name := range Drivers() {
		for _, r := range engines[name].rows {
			r.engine = name
			rows = append(rows, r)
		}
	}
	return rows
}

// FallbackDrivers returns the engines, sorted, that store.fallback_dsns
// applies to: those with other addresses (not a file).
func FallbackDrivers() []string {
	return slices.DeleteFunc(Drivers(), func(d string) bool { return !HasAddresses(d) })
}

// HasAddresses reports whether driver is an engine reached at network
// addresses, which store.fallback_dsns and the reports of the address in
// use apply to (not a file).
func HasAddresses(driver string) bool {
	d := engines[driver]
	return d != nil && d.noFallbacks == ""
}
