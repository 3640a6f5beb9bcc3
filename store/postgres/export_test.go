package postgres

// MigrateLock is the key of the advisory lock migrate takes, for the tests
// that hold it from outside.
const MigrateLock = pgMigrateLock
