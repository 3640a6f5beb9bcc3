package postgres

import (
	"strings"
	"testing"

	"github.com/jackc/pgx/v5/pgconn"
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
