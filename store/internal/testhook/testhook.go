// Package testhook holds the hooks by which the tests of package store
// and of the engines reach into a store, kept out of store's public API.
package testhook

// AfterLayoutRead makes s, a store of package store, run f in each worker
// id claim between reading the snowflake layout and writing, so that a
// test can hold a claim there. Package store sets it.
var AfterLayoutRead func(s any, f func())

// Migrator returns what an engine's Migrate is given for s, a store of
// package store (an engine.Migrator), so that an engine's tests can take
// its migration lock as Migrate does. Package store sets it.
var Migrator func(s any) any
