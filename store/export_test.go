package store

// PostgresMigrateLock is the key of the advisory lock Postgres.Migrate
// takes, for the tests that hold it from outside.
const PostgresMigrateLock = pgMigrateLock

// AfterLayoutRead makes s run f in every claim of a worker id after the
// claim read the recorded snowflake layout and before it writes anything.
// On a sharded store, the claims of its first database, where its worker
// ids are leased.
func AfterLayoutRead(s Store, f func()) {
	if sh, ok := s.(*Sharded); ok {
		sh.dbs[0].d.afterLayoutRead = f
		return
	}
	s.(engineStore).sqlDB().afterLayoutRead = f
}

// SetBeforeClaim makes s call f before each database's step of an
// initialisation, for tests that stop two initialisations between steps.
func SetBeforeClaim(s *Sharded, f func(db int)) { s.beforeClaim = f }
