package postgres

import (
	"fmt"
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"

	"github.com/leafd/leafd/store/internal/engine"
)

// TestRows: every row of the error table is found by the error it
// describes, and classify sorts that error by it.
func TestRows(t *testing.T) {
	for _, r := range rows {
		code := strings.Replace(r.Code, "*", "006", 1)
		msg := "injected: " + r.Match + " " + r.Name
		if got := rule(code, msg); got == nil || got.Code != r.Code || got.Match != r.Match {
			t.Errorf("%s %q: the table finds %+v for it", r.Code, r.Match, got)
		}
		if v := classify(&pgconn.PgError{Code: code, Message: msg}); v.Class != r.Class {
			t.Errorf("%s %q: classified %d, want %d", r.Code, r.Match, v.Class, r.Class)
		}
	}
}

// A connection pgx found closed (its socket went while it was idle in the
// pool) is a lost connection, which a store with fallback addresses moves
// on from, not an internal error.
func TestConnClosedLost(t *testing.T) {
	if v := classify(fmt.Errorf("begin: %w", pgconn.ErrConnClosed)); v != engine.Lost {
		t.Fatalf("classify(ErrConnClosed) = %+v, want engine.Lost", v)
	}
}
