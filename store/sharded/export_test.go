package sharded

import (
	"time"

	"github.com/leafd/leafd/store"
	"github.com/leafd/leafd/store/internal/testhook"
)

// AfterLayoutRead is testhook.AfterLayoutRead, on a sharded store the claims
// of its first database, where its worker ids are leased.
func AfterLayoutRead(s store.Store, f func()) {
	if sh, ok := s.(*Store); ok {
		s = sh.dbs[0].Node
	}
	testhook.AfterLayoutRead(s, f)
}

// SetBeforeClaim makes s call f before each database's step of an
// initialisation, for tests that stop two initialisations between steps.
func SetBeforeClaim(s *Store, f func(db int)) { s.beforeClaim = f }

// SetAfterMetaRead makes s call f after each read of a database's record
// while it checks the records, for tests that initialise the deployment
// between two of those reads.
func SetAfterMetaRead(s *Store, f func(db int)) { s.afterMetaRead = f }

// SetOwnersRefresh makes s read the slot placement again every d rather
// than every 10 s, for tests that wait for a refresh.
func SetOwnersRefresh(s *Store, d time.Duration) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.refresh = d
}
