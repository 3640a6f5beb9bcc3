package mysql_test

import (
	"context"
	"database/sql"
	"strings"
	"testing"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/internal/testkit/testdb"
	"github.com/leafd/leafd/store"
)

func TestOpenMySQLBadDSN(t *testing.T) {
	for _, c := range []struct{ name, dsn, want string }{
		{"NotADSN", "not a dsn ::", "does not parse"},
		{"Empty", "", "empty"},
		{"NoDatabase", "root@tcp(127.0.0.1:3306)/", "names no database"},
		{"BadParam", "root@tcp(127.0.0.1:3306)/leafd?parseTime=maybe", "does not parse"},
	} {
		t.Run(c.name, func(t *testing.T) {
			s, err := store.Open("mysql", c.dsn)
			if err == nil {
				s.Close()
				t.Fatalf("OpenMySQL(%q) succeeded", c.dsn)
			}
			if !strings.Contains(err.Error(), c.want) {
				t.Fatalf("OpenMySQL(%q): %v, want it to say %q", c.dsn, err, c.want)
			}
		})
	}
}

// leafTableUTF8 is leaf_alloc as Leaf's scripts/leaf_alloc.sql creates it:
// CHARSET=utf8, three bytes a character at most.
var leafTableUTF8 = testdb.LeafTable("mysql") + ` DEFAULT CHARSET=utf8`

// A description with a 4-byte UTF-8 character (an emoji), on a table made
// by Leaf's own DDL, is refused as invalid_body naming the column's
// character set and the ALTER that widens it, on creation and on update;
// once the table is widened, it is stored.
func TestMySQLDescriptionCharset(t *testing.T) {
	dsn := testdb.MySQL(t)
	raw, err := sql.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer raw.Close()
	if _, err := raw.Exec(leafTableUTF8); err != nil {
		t.Fatal(err)
	}
	s, err := store.Open("mysql", dsn)
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	ctx := context.Background()
	if err := s.Migrate(ctx); err != nil {
		t.Fatal(err)
	}
	const rocket = "launch \U0001F680"
	refused := func(what string, err error) {
		t.Helper()
		msg := leafd.ErrorMessage(err)
		if leafd.ErrorCode(err) != leafd.EInvalidBody || !strings.Contains(msg, "character set is utf8") ||
			!strings.Contains(msg, "ALTER TABLE leaf_alloc CONVERT TO CHARACTER SET utf8mb4") {
			t.Fatalf("%s: %v (code %q), want invalid_body naming the character set and the ALTER", what, err, leafd.ErrorCode(err))
		}
	}
	_, err = s.CreateTag(ctx, leafd.Tag{Name: "order", Step: 10, Description: rocket})
	refused("CreateTag with an emoji", err)
	if _, err := s.CreateTag(ctx, leafd.Tag{Name: "order", Step: 10, Description: "plain é"}); err != nil {
		t.Fatal(err)
	}
	desc := rocket
	_, _, err = s.UpdateTag(ctx, "order", leafd.TagUpdate{Description: &desc})
	refused("UpdateTag with an emoji", err)

	if _, err := raw.Exec("ALTER TABLE leaf_alloc CONVERT TO CHARACTER SET utf8mb4"); err != nil {
		t.Fatal(err)
	}
	if _, got, err := s.UpdateTag(ctx, "order", leafd.TagUpdate{Description: &desc}); err != nil || got.Description != rocket {
		t.Fatalf("UpdateTag with an emoji after the ALTER = %+v, %v", got, err)
	}
}
