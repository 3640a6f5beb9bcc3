package config

import "strings"

// DSNKind guesses from its shape which driver a data source name was
// written for: "mysql", "postgres", "sqlite", or "" when the shape says
// none.
//
// A MySQL DSN (go-sql-driver/mysql's user:password@tcp(host:3306)/dbname)
// has an address in tcp(…) or unix(…), or a user before "@/"; a mysql://
// URL counts too. A PostgreSQL DSN is a postgres:// or postgresql:// URL,
// or key=value pairs with host= or dbname=. A SQLite DSN starts with file:, is :memory:, or is a
// path ending in .db, .db3, .sqlite or .sqlite3. The guess exists so that a
// DSN given to the wrong driver stops start-up: the SQLite driver takes
// anything for a path (and would create a directory named
// root@tcp(127.0.0.1:3306)), and the MySQL driver's own complaint about a
// SQLite path ("default addr for network 'file:data' unknown") does not say
// what is wrong.
func DSNKind(dsn string) string {
	s := strings.TrimSpace(dsn)
	lower := strings.ToLower(s)
	switch {
	case s == "":
		return ""
	case strings.HasPrefix(lower, "postgres://"), strings.HasPrefix(lower, "postgresql://"),
		strings.Contains(" "+lower, " host="), strings.Contains(" "+lower, " dbname="):
		return "postgres"
	case strings.HasPrefix(lower, "mysql://"),
		strings.Contains(lower, "@tcp("), strings.Contains(lower, "@unix("),
		strings.HasPrefix(lower, "tcp("), strings.HasPrefix(lower, "unix("),
		strings.Contains(userPart(s), "@") && strings.Contains(s, "@/"):
		return "mysql"
	case strings.HasPrefix(lower, "file:"), lower == ":memory:":
		return "sqlite"
	}
	path, _, _ := strings.Cut(lower, "?")
	for _, ext := range []string{".db", ".db3", ".sqlite", ".sqlite3"} {
		if strings.HasSuffix(path, ext) {
			return "sqlite"
		}
	}
	return ""
}

// userPart returns what precedes the database name of a MySQL DSN: the
// text before its last slash (a password may hold a slash of its own only
// before the '@', which is before the last slash too).
func userPart(dsn string) string {
	if i := strings.LastIndexByte(dsn, '/'); i >= 0 {
		return dsn[:i+1]
	}
	return dsn
}

// MaskDSN returns dsn with its password replaced by "***", for messages
// and logs: root:secret@tcp(db:3306)/leaf becomes
// root:***@tcp(db:3306)/leaf, postgres://u:secret@db/leaf becomes
// postgres://u:***@db/leaf, and password=secret in key=value pairs becomes
// password=***. A DSN without a password is returned as it is.
func MaskDSN(dsn string) string {
	if DSNKind(dsn) == "postgres" && !strings.Contains(dsn, "://") {
		return maskKeyValue(dsn)
	}
	// As go-sql-driver/mysql reads it: the last '@' before the database
	// name ends the credentials, the first ':' in them starts the password.
	head := userPart(dsn)
	at := strings.LastIndexByte(head, '@')
	if at < 0 {
		return dsn
	}
	start := 0
	if i := strings.Index(head[:at], "://"); i >= 0 { // mysql://user:pw@host/db
		start = i + len("://")
	}
	colon := strings.IndexByte(head[start:at], ':')
	if colon < 0 || start+colon+1 == at {
		return dsn // no password, or an empty one
	}
	return dsn[:start+colon+1] + "***" + dsn[at:]
}

// maskKeyValue masks the value of password= in key=value pairs (libpq's
// format), quoted or not.
func maskKeyValue(dsn string) string {
	i := strings.Index(" "+dsn, " password=")
	if i < 0 {
		return dsn
	}
	start := i + len("password=")
	end := start
	if end < len(dsn) && dsn[end] == '\'' {
		for end++; end < len(dsn) && dsn[end] != '\''; end++ {
			if dsn[end] == '\\' {
				end++
			}
		}
		end++
	} else {
		for end < len(dsn) && dsn[end] != ' ' {
			end++
		}
	}
	return dsn[:start] + "***" + dsn[min(end, len(dsn)):]
}
