package sqlite

import "testing"

// TestRows: every row of the error table is found by the result code it
// describes; an extended code without a row of its own takes its primary
// code's row, and a constraint other than a key's is nobody's.
func TestRows(t *testing.T) {
	for _, r := range rows {
		msg := "injected: " + r.Match + " " + r.Name
		if got := rule(codes[r.Code], msg); got == nil || got.Code != r.Code || got.Match != r.Match {
			t.Errorf("%s %q: the table finds %+v for it", r.Code, r.Match, got)
		}
	}
	if r := rule(5|2<<8, "database is locked"); r == nil || r.Code != "SQLITE_BUSY" { // SQLITE_BUSY_SNAPSHOT
		t.Errorf("SQLITE_BUSY_SNAPSHOT: row %+v, want SQLITE_BUSY's", r)
	}
	if r := rule(19|3<<8, "FOREIGN KEY constraint failed"); r != nil { // SQLITE_CONSTRAINT_FOREIGNKEY
		t.Errorf("SQLITE_CONSTRAINT_FOREIGNKEY: row %+v, want none", r)
	}
}
