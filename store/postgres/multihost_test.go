package postgres_test

import (
	"slices"
	"strings"
	"testing"

	"github.com/leafd/leafd/store"
)

// A multi-host URL, the way clients reach a Patroni cluster or any
// primary with standbys (every node named, target_session_attrs choosing
// the one that takes writes), is a PostgreSQL DSN that leafd accepts as it
// is, and its password is masked.
func TestPostgresMultiHostDSN(t *testing.T) {
	for _, dsn := range []string{
		"postgres://leafd:s3cret@db1:5432,db2:5432,db3:5432/leaf?target_session_attrs=read-write",
		"postgresql://leafd:s3cret@db1,db2,db3/leaf?target_session_attrs=primary&connect_timeout=2",
		"host=db1,db2,db3 port=5432,5432,5432 user=leafd password=s3cret dbname=leaf target_session_attrs=read-write",
	} {
		if got := store.DSNKinds(dsn); !slices.Equal(got, []string{"postgres"}) {
			t.Errorf("DSNKinds(%q) = %q, want postgres alone", dsn, got)
		}
		if err := store.CheckDSN("postgres", dsn); err != nil {
			t.Errorf("CheckDSN(postgres, %q) = %v, want nil", dsn, err)
		}
		if masked := store.MaskDSN(dsn); strings.Contains(masked, "s3cret") || !strings.Contains(masked, "db3") {
			t.Errorf("MaskDSN(%q) = %q: want the password masked and every host kept", dsn, masked)
		}
	}
}
