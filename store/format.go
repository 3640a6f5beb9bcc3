package store

import (
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// A tag's format lives in leafd's table leafd_tag_format (migrations
// 00005): a tag without a row is sequential, Leaf's. The segment allocator
// maps an opaque tag's counters to IDs; the store only keeps what it was
// created with.
const (
	formatsSQL      = `SELECT biz_tag, format, digits, key_fingerprint FROM leafd_tag_format`
	formatInsertSQL = `INSERT INTO leafd_tag_format (biz_tag, format, digits, key_fingerprint) VALUES (?, ?, ?, ?)`
)

type formatRow struct {
	Name        string `db:"biz_tag"`
	Format      string `db:"format"`
	Digits      int    `db:"digits"`
	Fingerprint string `db:"key_fingerprint"`
}

// validateFormat checks the format fields of a tag to create.
func validateFormat(t leafd.Tag) error {
	switch t.Format {
	case "", segment.FormatSequential:
		if t.Digits != 0 || t.KeyFingerprint != "" {
			return leafd.Errorf(leafd.EInvalidBody, "digits apply to an opaque tag only: add \"format\":\"opaque\" or leave digits out")
		}
	case segment.FormatOpaque:
		if t.KeyFingerprint == "" {
			return fmt.Errorf("store: an opaque tag needs its key fingerprint")
		}
		return segment.ValidateDigits(t.Digits)
	default:
		return leafd.Errorf(leafd.EInvalidBody, "format %q is not known: use sequential or opaque", t.Format)
	}
	return nil
}

// withFormats sets the format of every tag of tags that has a row, read
// through q. A database without the table (not migrated yet) has none.
func (s *db) withFormats(ctx context.Context, q queryer, tags []leafd.Tag, one string) error {
	query, args := formatsSQL, []any(nil)
	if one != "" {
		query, args = formatsSQL+` WHERE biz_tag = ?`, []any{one}
	}
	var rows []formatRow
	if err := sqlx.SelectContext(ctx, q, &rows, q.Rebind(query), args...); err != nil {
		if MissingTable(err) {
			return nil
		}
		return err
	}
	if len(rows) == 0 {
		return nil
	}
	byName := make(map[string]formatRow, len(rows))
	for _, r := range rows {
		byName[r.Name] = r
	}
	for i := range tags {
		if r, ok := byName[tags[i].Name]; ok {
			tags[i].Format, tags[i].Digits, tags[i].KeyFingerprint = r.Format, r.Digits, r.Fingerprint
		}
	}
	return nil
}

// insertFormat records the format of a tag being created in tx.
func (s *db) insertFormat(ctx context.Context, tx *sqlx.Tx, t leafd.Tag) error {
	if t.Format != segment.FormatOpaque {
		return nil
	}
	_, err := tx.ExecContext(ctx, s.q(formatInsertSQL), t.Name, t.Format, t.Digits, t.KeyFingerprint)
	return err
}
