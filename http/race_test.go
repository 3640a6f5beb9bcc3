//go:build race

package http_test

// raceEnabled: the race detector slows the server tenfold, and the tests
// that measure time under load loosen their bounds.
const raceEnabled = true
