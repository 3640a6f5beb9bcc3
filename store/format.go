package store

import (
	"cmp"
	"context"
	"fmt"

	"github.com/jmoiron/sqlx"

	"github.com/leafd/leafd"
	"github.com/leafd/leafd/segment"
)

// A tag's format lives in leafd's table leafd_tag_format (migrations
// 00005, 00009): a tag without a row is sequential, Leaf's. The segment
// allocator maps an opaque tag's counters to IDs and makes a dated tag's
// windows; the store only keeps what the tag was created with.
const (
	formatColumns   = `biz_tag, format, digits, key_fingerprint, period, zone, max_step`
	formatsSQL      = `SELECT ` + formatColumns + ` FROM leafd_tag_format`
	formatInsertSQL = `INSERT INTO leafd_tag_format (` + formatColumns + `) VALUES (?, ?, ?, ?, ?, ?, ?)`
	maxStepSQL      = `UPDATE leafd_tag_format SET max_step = ? WHERE biz_tag = ?`
)

type formatRow struct {
	Name        string `db:"biz_tag"`
	Format      string `db:"format"`
	Digits      int    `db:"digits"`
	Fingerprint string `db:"key_fingerprint"`
	Period      string `db:"period"`
	Zone        string `db:"zone"`
	MaxStep     int64  `db:"max_step"`
}

// validateFormat checks the format fields of a tag to create.
func validateFormat(t leafd.Tag) error {
	if t.Format != segment.FormatDated && (t.Period != "" || t.Zone != "" || t.MaxStep != 0) {
		return leafd.Errorf(leafd.EInvalidBody, "period, zone and max_step apply to a dated tag only: add \"format\":\"dated\" or leave them out")
	}
	switch t.Format {
	case "", segment.FormatSequential:
		if t.Digits != 0 || t.KeyFingerprint != "" {
			return leafd.Errorf(leafd.EInvalidBody, "digits apply to an opaque or a dated tag only: add \"format\":\"opaque\" or \"format\":\"dated\", or leave digits out")
		}
	case segment.FormatOpaque:
		if t.KeyFingerprint == "" {
			return fmt.Errorf("store: an opaque tag needs its key fingerprint")
		}
		return segment.ValidateDigits(t.Digits)
	case segment.FormatDated:
		if t.KeyFingerprint != "" {
			return leafd.Errorf(leafd.EInvalidBody, "a dated tag has no key: its IDs are its numbers, which only an opaque tag maps")
		}
		if err := segment.ValidateDated(t.Period, t.Zone, t.Digits); err != nil {
			return err
		}
		if t.MaxID > 1 {
			// A max_id past the current period would hold the tag back
			// until its period came; below it, it means nothing.
			return leafd.Errorf(leafd.EInvalidBody, "max_id does not apply to a dated tag: its numbers start at 1 in each period; leave max_id out")
		}
		if t.MaxStep < 0 || t.MaxStep > MaxTableStep {
			return leafd.Errorf(leafd.EInvalidBody, "max_step %d is out of range: use 1 to %d, or 0 for no cap", t.MaxStep, MaxTableStep)
		}
	default:
		return leafd.Errorf(leafd.EInvalidBody, "format %q is not known: use sequential, opaque or dated", t.Format)
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
	if err := sqlx.SelectContext(ctx, q, &rows, q.Rebind(query), args...); err != nil && !MissingTable(err) {
		return err
	}
	byName := make(map[string]formatRow, len(rows))
	for _, r := range rows {
		byName[r.Name] = r
	}
	for i := range tags {
		if r, ok := byName[tags[i].Name]; ok {
			tags[i].Format, tags[i].Digits, tags[i].KeyFingerprint = r.Format, r.Digits, r.Fingerprint
			tags[i].Period, tags[i].Zone, tags[i].MaxStep = r.Period, r.Zone, r.MaxStep
		}
	}
	return nil
}

// insertFormat records the format of a tag being created in tx; a
// sequential tag has no row.
func (s *db) insertFormat(ctx context.Context, tx *sqlx.Tx, t leafd.Tag) error {
	if !hasFormatRow(t) {
		return nil
	}
	_, err := tx.ExecContext(ctx, s.q(formatInsertSQL), t.Name, t.Format, t.Digits, t.KeyFingerprint, t.Period, t.Zone, t.MaxStep)
	return err
}

// hasFormatRow reports whether t's format has a row in leafd_tag_format.
func hasFormatRow(t leafd.Tag) bool {
	return t.Format == segment.FormatOpaque || t.Format == segment.FormatDated
}

// A tag's past outlives its leaf_alloc row: its format row, its
// high-water mark and its slots' counters (sharded stores) stay when the
// row is deleted. Creating the tag again must continue above every ID it
// ever issued, so it is created in the format it had (max_id starting at
// its mark), or refused: IDs of another format, domain or key would fall
// among those already issued.
const (
	pastFormatSQL = formatsSQL + ` WHERE biz_tag = ?`
	pastMarkSQL   = `SELECT biz_tag, max_id FROM leafd_tag_highwater WHERE biz_tag = ?`
	pastSlotsSQL  = `SELECT DISTINCT biz_tag FROM leafd_slot_alloc WHERE biz_tag = ?`
)

// past is what the store keeps of a tag name besides its leaf_alloc row.
type past struct {
	// format is the tag's format row, if it has one (Name set).
	format formatRow
	// mark is its high-water mark; 0 when no range was ever loaded.
	mark int64
	// slots is set when a slot of a sharded store handed out its IDs.
	slots bool
	// twin is a name that differs from the tag's only in letter case
	// whose rows the database's "=" (MySQL's default collation) also
	// finds: their records would be shared.
	twin string
}

// recorded reports whether the name has a format row or handed out IDs.
func (p past) recorded() bool { return p.format.Name != "" || p.mark > 0 || p.slots }

// pastOf reads what the store keeps of name through q. A table missing
// (the database not migrated) is an error that says so: a tag is never
// created unchecked.
func pastOf(ctx context.Context, q queryer, name string) (past, error) {
	var p past
	seen := func(n string) bool {
		if n != name && p.twin == "" {
			p.twin = n
		}
		return n == name
	}
	var formats []formatRow
	if err := sqlx.SelectContext(ctx, q, &formats, q.Rebind(pastFormatSQL), name); err != nil {
		return p, pastErr("leafd_tag_format", err)
	}
	for _, r := range formats {
		if seen(r.Name) {
			p.format = r
		}
	}
	var marks []struct {
		Name  string `db:"biz_tag"`
		MaxID int64  `db:"max_id"`
	}
	if err := sqlx.SelectContext(ctx, q, &marks, q.Rebind(pastMarkSQL), name); err != nil {
		return p, pastErr("leafd_tag_highwater", err)
	}
	for _, r := range marks {
		if seen(r.Name) {
			p.mark = r.MaxID
		}
	}
	var slots []string
	if err := sqlx.SelectContext(ctx, q, &slots, q.Rebind(pastSlotsSQL), name); err != nil {
		return p, pastErr("leafd_slot_alloc", err)
	}
	for _, n := range slots {
		p.slots = seen(n) || p.slots
	}
	return p, nil
}

// pastErr says, for the log, what a missing table of a tag's past means.
func pastErr(table string, err error) error {
	if MissingTable(err) {
		return fmt.Errorf("the table %s is missing: run `leafd migrate` (or start with store.migrate: true): %w", table, err)
	}
	return err
}

// check refuses, with tag_conflict, to create t where the name's past
// says it was another tag: another format, domain or key, another period,
// zone or counter width, or a name
// whose records are shared with a tag that differs only in letter case.
func (p past) check(t leafd.Tag) error {
	if p.twin != "" {
		return leafd.Errorf(leafd.ETagConflict, "tag %q cannot be created: the database takes it for %q, a tag deleted before whose "+
			"records (its format, the IDs it issued) it still keeps; tag names are compared without case on MySQL: pick another name", t.Name, p.twin)
	}
	if !p.recorded() {
		return nil
	}
	had := formatOf(p.format)
	want := formatOf(formatRow{Format: t.Format, Digits: t.Digits, Fingerprint: t.KeyFingerprint, Period: t.Period, Zone: t.Zone})
	if had == want {
		return nil
	}
	upTo := ""
	if p.mark > 0 {
		upTo = fmt.Sprintf(" (counters up to %d)", p.mark-1)
	}
	if had.Format == segment.FormatOpaque && want.Format == had.Format && had.Digits == want.Digits {
		return leafd.Errorf(leafd.ETagConflict, "tag %q cannot be created: it was an opaque tag before it was deleted, "+
			"created with another segment.opaque_key than this server's (key fingerprint %s, this server's %s); its IDs under "+
			"this key would repeat those it issued%s. Create it through a server with the key it was created with, or pick a new name",
			t.Name, had.Fingerprint, want.Fingerprint, upTo)
	}
	return leafd.Errorf(leafd.ETagConflict, "tag %q cannot be created as %s: it was %s before it was deleted, and its IDs%s "+
		"would be repeated by IDs of another format or domain. Create it again as %s (it continues above every ID it issued), "+
		"or pick a new name", t.Name, describeFormat(want), describeFormat(had), upTo, describeFormat(had))
}

// formatOf is what of a format row decides a tag's IDs: sequential when
// it has none; a dated tag's zone "" is UTC. A dated tag's max_step is not
// part of it: it only caps the steps servers choose.
func formatOf(r formatRow) formatRow {
	switch r.Format {
	case segment.FormatOpaque:
		return formatRow{Format: r.Format, Digits: r.Digits, Fingerprint: r.Fingerprint}
	case segment.FormatDated:
		return formatRow{Format: r.Format, Digits: r.Digits, Period: r.Period, Zone: cmp.Or(r.Zone, "UTC")}
	}
	return formatRow{Format: segment.FormatSequential}
}

// describeFormat words a format as the body of POST /api/tags gives it.
func describeFormat(r formatRow) string {
	switch {
	case r.Format == segment.FormatDated:
		return fmt.Sprintf(`a dated tag of %s periods in %s with %d digits ("format":"dated","period":%q,"zone":%q,"digits":%d)`,
			r.Period, r.Zone, r.Digits, r.Period, r.Zone, r.Digits)
	case r.Format != segment.FormatOpaque:
		return `a sequential tag ("format":"sequential")`
	case r.Digits == 0:
		return `an opaque tag below 2^53 ("format":"opaque", no digits)`
	}
	return fmt.Sprintf(`an opaque tag of %d digits ("format":"opaque","digits":%d)`, r.Digits, r.Digits)
}
