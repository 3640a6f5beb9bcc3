package store

import (
	"regexp"
	"slices"

	"github.com/leafd/leafd/store/internal/engine"
)

// The engines are packages of their own (store/mysql, store/postgres,
// store/sqlite), each declaring its dialect and registering it from init,
// as database/sql drivers do; store/all imports them all. Everything below
// iterates the registry: nothing in this package names an engine.

// Drivers returns the names store.driver accepts, sorted.
func Drivers() []string { return engine.Names() }

// DefaultDriver returns the engine of the default store.driver: an
// embedded file, so that leafd runs on a fresh machine with nothing
// installed. Its example DSN is the default store.dsn. "" when that engine
// is not registered.
func DefaultDriver() string {
	for _, name := range Drivers() {
		if lookup(name).Default {
			return name
		}
	}
	return ""
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
	d, ok := engine.Lookup(driver)
	return ok && d.NoFallbacks == ""
}

// lookup returns the registered engine name, one of Drivers.
func lookup(name string) *engine.Dialect {
	d, _ := engine.Lookup(name)
	return d
}

// leafdRedactions hide the database names of leafd's own words, whatever
// the engine: CREATE DATABASE leaf in its hints, and database leaf does not
// exist (of a MySQL name with spaces too).
var leafdRedactions = []engine.Redaction{
	{Pattern: regexp.MustCompile(`(?i)\b(create database) [^\s"(),;:]+`), With: "$1 …"},
	{Pattern: regexp.MustCompile(`(?i)\bdatabase [^"\n]+? does not exist`), With: "database … does not exist"},
}

// Redact hides the database accounts and database names in an error text
// for those who may read it without a token (/api/state, unless
// admin.protect_dashboard is set): a user name is half of a login, and a
// database name a step towards it. Every engine's rules apply, then
// leafd's own, whatever engine the text came from. The server's log keeps
// the whole text.
func Redact(msg string) string {
	for _, name := range Drivers() {
		for _, r := range lookup(name).Redact {
			msg = r.Pattern.ReplaceAllString(msg, r.With)
		}
	}
	for _, r := range leafdRedactions {
		msg = r.Pattern.ReplaceAllString(msg, r.With)
	}
	return msg
}
