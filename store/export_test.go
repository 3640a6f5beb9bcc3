package store

// PostgresMigrateLock is the key of the advisory lock Postgres.Migrate
// takes, for the tests that hold it from outside.
const PostgresMigrateLock = pgMigrateLock
