package store

import (
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
