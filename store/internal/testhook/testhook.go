// Package testhook holds the hooks by which the tests of package store
// and of the engines reach into a store, kept out of store's public API.
// Package store sets every one from its init.
package testhook

import (
	"context"
	"database/sql/driver"
	"time"

	"github.com/jmoiron/sqlx"
)

// AfterLayoutRead makes s, a store of package store, run f in each worker
// id claim between reading the snowflake layout and writing, so that a
// test can hold a claim there.
var AfterLayoutRead func(s any, f func())

// Migrator returns what an engine's Migrate is given for s, a store of
// package store (an engine.Migrator), so that an engine's tests can take
// its migration lock as Migrate does, and reach the store's pool and its
// classification of errors.
var Migrator func(s any) any

// BeforeCommit makes s, a store of package store, run f between the
// SELECT and the COMMIT of each Allocate (f nil: nothing), so that a test
// can make a real database fail the transaction there.
var BeforeCommit func(s any, f func(ctx context.Context, tx *sqlx.Tx) error)

// WithConnector returns the store.Option that wraps the connector of every
// address of the store in wrap, so that a test can put a driver that
// injects faults (internal/testkit/faultdriver) between the store and the
// engine's own.
var WithConnector func(wrap func(driver.Connector) driver.Connector) any

// RetryFor bounds the retries of s's transactions that the database aborts
// by time, as an engine's Dialect.RetryFor does, for s alone.
var RetryFor func(s any, d time.Duration)

// MaxAttempts is how many times a store runs a transaction that the
// database keeps aborting for a retry (where its engine sets no RetryFor).
var MaxAttempts int
