package store_test

import (
	"testing"

	"github.com/leafd/leafd/store"
)

// The accounts and database names that the engines' errors and leafd's own
// messages quote are hidden, whatever engine the text came from; the rest
// of the text stays as it is.
func TestRedact(t *testing.T) {
	for msg, want := range map[string]string{
		// MySQL
		"Error 1045 (28000): Access denied for user 'leafd'@'10.0.0.9' (using password: YES)": "Error 1045 (28000): Access denied for user '…'@'…' (using password: YES)",
		"Error 1049 (42000): Unknown database 'leaf'":                                         "Error 1049 (42000): Unknown database …",
		// pgx and PostgreSQL
		"failed to connect to `user=leafd database=leaf`: 10.0.0.9:5432 (db): server error: FATAL: role \"leafd\" does not exist": "failed to connect to `user=… database=…`: 10.0.0.9:5432 (db): server error: FATAL: role \"…\" does not exist",
		"no pg_hba.conf entry for host \"10.0.0.9\", user \"leafd\", database \"leaf\", no encryption":                            "no pg_hba.conf entry for host \"10.0.0.9\", user \"…\", database \"…\", no encryption",
		"FATAL: database \"Leafd No Such Db\" does not exist (SQLSTATE 3D000)":                                                    "FATAL: database \"…\" does not exist (SQLSTATE 3D000)",
		"permission denied for database leaf": "permission denied for database …",
		// leafd's own words, for either engine
		"database leaf-d does not exist: create it with CREATE DATABASE `leaf-d`":             "database … does not exist: create it with CREATE DATABASE …",
		"database Qxz absentdb does not exist: create it with CREATE DATABASE `Qxz absentdb`": "database … does not exist: create it with CREATE DATABASE …",
		"database leafd does not exist, create it with CREATE DATABASE leafd":                 "database … does not exist, create it with CREATE DATABASE …",
		// nothing to hide
		"dial tcp 10.0.0.9:3306: connect: connection refused": "dial tcp 10.0.0.9:3306: connect: connection refused",
		"": "",
	} {
		if got := store.Redact(msg); got != want {
			t.Errorf("Redact(%q)\n got  %q\n want %q", msg, got, want)
		}
	}
}
