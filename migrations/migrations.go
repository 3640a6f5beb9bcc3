// Package migrations holds leafd's database schema as goose SQL migrations,
// one directory per dialect, embedded into the binary. The store package
// applies them with goose's Provider; `leafd migrate` does the same on
// demand.
//
// Every migration must be safe on a database that Java Leaf already uses:
// it creates what is missing and never rewrites a row.
package migrations

import (
	"embed"
	"io/fs"
)

//go:embed mysql/*.sql postgres/*.sql sqlite/*.sql
var files embed.FS

// MySQL holds the migrations for MySQL, MariaDB and engines that speak the
// same SQL, rooted at their directory as goose expects.
var MySQL = sub("mysql")

// Postgres holds the migrations for PostgreSQL, rooted at their directory.
var Postgres = sub("postgres")

// SQLite holds the migrations for SQLite, rooted at their directory.
var SQLite = sub("sqlite")

func sub(dir string) fs.FS {
	f, err := fs.Sub(files, dir)
	if err != nil {
		panic(err) // dir is a constant that go:embed has already checked
	}
	return f
}
