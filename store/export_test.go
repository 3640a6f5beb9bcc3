package store

// PostgresMigrateLock is the key of the advisory lock Postgres.Migrate
// takes, for the tests that hold it from outside.
const PostgresMigrateLock = pgMigrateLock

// SetBeforeClaim makes s call f before each database's step of an
// initialisation, for tests that stop two initialisations between steps.
func SetBeforeClaim(s *Sharded, f func(db int)) { s.beforeClaim = f }
