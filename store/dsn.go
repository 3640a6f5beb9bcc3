package store

import (
	"fmt"
	"net/url"
	"slices"
	"strings"
)

// DSNKinds returns the engines, by store.driver name and sorted, that
// read dsn as written for them; none when no engine does. It exists so
// that a DSN given to the wrong driver stops start-up: the SQLite driver
// takes anything for a path, and would serve from a new file named after a
// PostgreSQL DSN (its password in the name) or in a directory named
// root@tcp(127.0.0.1:3306). Each engine judges by its own syntax
// (mysqlDSN, postgresDSN, sqliteDSN); a DSN two engines read, such as
// tcp/leaf.db, is left to store.driver.
func DSNKinds(dsn string) []string {
	var kinds []string
	for _, name := range Drivers() {
		if engines[name].claims(dsn) {
			kinds = append(kinds, name)
		}
	}
	return kinds
}

// EngineName returns the name of driver's engine as messages say it:
// "MySQL", "PostgreSQL", "SQLite"; driver itself when it is unknown.
func EngineName(driver string) string {
	if e, ok := engines[driver]; ok {
		return e.title
	}
	return driver
}

// ExampleDSN returns the shape of a DSN of driver's engine, as messages
// suggest it; "" when driver is unknown.
func ExampleDSN(driver string) string {
	if e, ok := engines[driver]; ok {
		return e.example
	}
	return ""
}

// OtherEngine returns the engine, by store.driver name, that dsn is
// written for when driver's does not read it as its own (DSNKinds); ""
// otherwise, and when driver is unknown. Open and config refuse such a DSN.
func OtherEngine(driver, dsn string) string {
	kinds := DSNKinds(dsn)
	if _, ok := engines[driver]; !ok || len(kinds) == 0 || slices.Contains(kinds, driver) {
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
	if isPostgresURL(dsn) {
		return maskURL(dsn)
	}
	if postgresDSN(dsn) || strings.Contains(dsn, "=") && strings.ContainsAny(dsn, " \t\n\r\v\f") {
		dsn = maskKeywordValues(dsn)
	}
	return maskMySQL(dsn)
}

// secretKeys are the keys of a PostgreSQL DSN whose values are secrets.
var secretKeys = map[string]bool{"password": true, "sslpassword": true}

// maskMySQL masks a go-sql-driver/mysql DSN's password as the driver reads
// it: the last '@' before the database name ends the credentials, the
// first ':' in them starts the password. A mysql:// URL is read the same
// way.
func maskMySQL(dsn string) string {
	head := dsn
	if i := strings.LastIndexByte(dsn, '/'); i >= 0 { // a password may hold a '/' before its '@'
		head = dsn[:i+1]
	}
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

// maskURL masks the password of a URL's user and the secrets among its
// query parameters. pgx ends the user and password at the first '@' before
// any '/', so a '?' or '#' may be in the password; the mask runs to the
// last such '@', in case the password holds one too.
func maskURL(dsn string) string {
	scheme := strings.Index(dsn, "://") + len("://")
	host := dsn[scheme:]
	if i := strings.IndexByte(host, '/'); i >= 0 {
		host = host[:i]
	}
	if at := strings.LastIndexByte(host, '@'); at >= 0 {
		if colon := strings.IndexByte(host[:at], ':'); colon >= 0 && colon+1 < at {
			dsn = dsn[:scheme+colon+1] + "***" + dsn[scheme+at:]
		}
	}
	base, query, ok := strings.Cut(dsn, "?")
	if !ok {
		return dsn
	}
	params := strings.Split(query, "&")
	for i, p := range params {
		key, _, ok := strings.Cut(p, "=")
		name, err := url.QueryUnescape(key) // pgx unescapes the key: pass%77ord is password
		if err != nil {
			name = key
		}
		if ok && secretKeys[strings.ToLower(name)] {
			params[i] = key + "=***"
		}
	}
	return base + "?" + strings.Join(params, "&")
}

// maskKeywordValues masks the secrets among libpq's keyword=value pairs,
// read as libpq reads them: spaces around '=', values quoted with ' and
// escaped with \. What follows a pair it cannot read is masked whole.
func maskKeywordValues(dsn string) string {
	var b strings.Builder
	s := dsn
	for {
		rest := strings.TrimLeft(s, " \t\n\r\v\f")
		b.WriteString(s[:len(s)-len(rest)])
		if rest == "" {
			return b.String()
		}
		eq := strings.IndexByte(rest, '=')
		if eq < 0 {
			b.WriteString("***")
			return b.String()
		}
		key := strings.TrimSpace(rest[:eq])
		value := strings.TrimLeft(rest[eq+1:], " \t\n\r\v\f")
		b.WriteString(rest[:len(rest)-len(value)]) // the key, '=' and the spaces around it
		n, ok := valueLen(value)
		if !ok {
			b.WriteString("***")
			return b.String()
		}
		if secretKeys[key] {
			b.WriteString("***")
		} else {
			b.WriteString(value[:n])
		}
		s = value[n:]
	}
}

// valueLen returns the length of the value that starts s in libpq's
// keyword=value format, and false when a quoted value does not end.
func valueLen(s string) (int, bool) {
	if strings.HasPrefix(s, "'") {
		for i := 1; i < len(s); i++ {
			switch s[i] {
			case '\\':
				i++
			case '\'':
				return i + 1, true
			}
		}
		return 0, false
	}
	i := 0
	for i < len(s) && !strings.ContainsRune(" \t\n\r\v\f", rune(s[i])) {
		if s[i] == '\\' {
			i++
		}
		i++
	}
	return min(i, len(s)), true
}
