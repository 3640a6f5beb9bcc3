package store

import (
	_ "github.com/leafd/leafd/store/all" // the engines the tests open
)

// openDB opens a store of driver as its concrete type, for the tests of
// this package that reach into it.
func openDB(driver, dsn string, opts ...Option) (*db, error) {
	n, err := openEngine(driver, dsn, newOptions(opts))
	if err != nil {
		return nil, err
	}
	return n.(*db), nil
}
