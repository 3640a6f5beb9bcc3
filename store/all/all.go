// Package all registers every engine of package store: import it for its
// side effect, as the leafd command does. Adding an engine to leafd is
// adding its package here.
package all

import (
	_ "github.com/leafd/leafd/store/mysql"
	_ "github.com/leafd/leafd/store/postgres"
	_ "github.com/leafd/leafd/store/sqlite"
)
