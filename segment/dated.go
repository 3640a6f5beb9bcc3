package segment

import (
	"fmt"
	"math"
	"strings"
	"time"

	"github.com/leafd/leafd"
)

// Dated tags. An ID of a dated tag is the date number of its period in the
// tag's zone (yyyyMMdd, yyyyMM or yyyy) followed by a counter of Digits
// decimal digits that starts at 1 in each period: 20261127000123 is the
// 123rd number of 27 November 2026 with six digits. The IDs are the
// numbers themselves, so the tag's leaf_alloc row counts them like any
// other: a range of period P lies in [P·10^d + 1, (P+1)·10^d), and the
// store raises a max_id below the period's first number to it
// (Store.AllocateIn). Numbers grow from one period to the next, so the
// high-water mark that refuses a rewound tag covers every period's counter.

// FormatDated is the format of a dated tag (leafd.Tag.Format).
const FormatDated = "dated"

// The periods of a dated tag (leafd.Tag.Period).
const (
	PeriodDay   = "day"
	PeriodMonth = "month"
	PeriodYear  = "year"
)

// DefaultDatedDigits is a dated tag's counter width when none is given.
const DefaultDatedDigits = 6

// DefaultClockTolerance is how far a server's clock may differ from the
// database's before it loads no range of a dated tag
// (segment.clock_tolerance).
const DefaultClockTolerance = time.Second

// maxDateNumber is the largest date number of each period (year 9999): a
// period's last number, (P+1)·10^d - 1, must stay at or below 2^63-1.
var maxDateNumber = map[string]int64{PeriodDay: 99991231, PeriodMonth: 999912, PeriodYear: 9999}

// MaxDatedDigits returns the widest counter a dated tag of period can
// have: 10 for a day, 12 for a month, 14 for a year; 0 for an unknown
// period.
func MaxDatedDigits(period string) int {
	top, ok := maxDateNumber[period]
	if !ok {
		return 0
	}
	d := 0
	for scale := int64(10); (top + 1) <= math.MaxInt64/scale; scale *= 10 {
		d++
	}
	return d
}

// dated is what a server knows of a dated tag: how its numbers are made.
type dated struct {
	period string
	loc    *time.Location
	digits int
	scale  int64 // 10^digits
}

// newDated returns the spec of a dated tag of row, or the invalid_body
// error that says what is wrong with it.
func newDated(row leafd.Tag) (*dated, error) {
	if err := ValidateDated(row.Period, row.Zone, row.Digits); err != nil {
		return nil, err
	}
	loc, _ := loadZone(row.Zone)
	d := &dated{period: row.Period, loc: loc, digits: row.Digits, scale: 1}
	for range row.Digits {
		d.scale *= 10
	}
	return d, nil
}

// canonicalZone reports whether zone names the same zone on every
// server: not the server's own (Local, localtime, posixrules), nor a file
// of a system's zone database that others may lack (posix/, right/).
func canonicalZone(zone string) bool {
	switch zone {
	case "Local", "localtime", "posixrules", "Factory":
		return false
	}
	return !strings.HasPrefix(zone, "posix/") && !strings.HasPrefix(zone, "right/")
}

func loadZone(zone string) (*time.Location, error) {
	if zone == "" {
		return time.UTC, nil
	}
	return time.LoadLocation(zone)
}

// ValidateDated returns an invalid_body error unless period, zone and
// digits make a dated tag whose every number fits below 2^63.
func ValidateDated(period, zone string, digits int) error {
	most := MaxDatedDigits(period)
	if most == 0 {
		return leafd.Errorf(leafd.EInvalidBody, "period %q is not known: use day, month or year", period)
	}
	if _, err := loadZone(zone); err != nil || !canonicalZone(zone) {
		return leafd.Errorf(leafd.EInvalidBody, "zone %q is not a time zone: use an IANA name such as UTC or Asia/Shanghai", zone)
	}
	if digits < 1 || digits > most {
		return leafd.Errorf(leafd.EInvalidBody,
			"digits %d does not fit a %s tag: its numbers must stay below 2^63, so use 1 to %d", digits, period, most)
	}
	return nil
}

// number returns the date number of the period t lies in: yyyyMMdd,
// yyyyMM or yyyy in the tag's zone.
func (d *dated) number(t time.Time) int64 {
	y, m, day := t.In(d.loc).Date()
	switch d.period {
	case PeriodDay:
		return int64(y)*10000 + int64(m)*100 + int64(day)
	case PeriodMonth:
		return int64(y)*100 + int64(m)
	}
	return int64(y)
}

// end returns the first instant after t that lies in another period.
func (d *dated) end(t time.Time) time.Time {
	y, m, day := t.In(d.loc).Date()
	var e time.Time
	switch d.period {
	case PeriodDay:
		e = time.Date(y, m, day+1, 0, 0, 0, 0, d.loc)
	case PeriodMonth:
		e = time.Date(y, m+1, 1, 0, 0, 0, 0, d.loc)
	default:
		e = time.Date(y+1, 1, 1, 0, 0, 0, 0, d.loc)
	}
	if e.After(t) && d.number(e) != d.number(t) && d.number(e.Add(-time.Nanosecond)) == d.number(t) {
		return e
	}
	// Where a change of offset skips or repeats midnight, time.Date may
	// answer an instant on either side of it: search for the first instant
	// of another period, which lies within a day of it.
	lo, hi := t, e.Add(25*time.Hour)
	for hi.Sub(lo) > time.Nanosecond {
		mid := lo.Add(hi.Sub(lo) / 2)
		if d.number(mid) == d.number(t) {
			lo = mid
		} else {
			hi = mid
		}
	}
	return hi
}

// window returns the numbers of the period t lies in.
func (d *dated) window(t time.Time) Window {
	p := d.number(t)
	return Window{Floor: p*d.scale + 1, Limit: (p + 1) * d.scale}
}

// capacity returns the numbers a period holds: 10^digits - 1.
func (d *dated) capacity() int64 { return d.scale - 1 }

// label words the period of t as people write it: 2026-11-27, 2026-11 or
// 2026.
func (d *dated) label(t time.Time) string {
	switch t = t.In(d.loc); d.period {
	case PeriodDay:
		return t.Format("2006-01-02")
	case PeriodMonth:
		return t.Format("2006-01")
	}
	return t.Format("2006")
}

// zoneName is the zone as the tag was created with it, UTC when none.
func (d *dated) zoneName() string { return d.loc.String() }

// Window bounds the IDs of a range that Store.AllocateIn hands out.
type Window struct {
	// Floor is the lowest ID the range may start at: a max_id below it is
	// first raised to it.
	Floor int64
	// Limit is the first ID past the window: the range ends at or below
	// it, shorter than the step asked for when less room is left.
	Limit int64
	// Share, when not 0, bounds the range to 1/Share of the room left
	// below Limit (at least one ID), as the store reads it in the
	// transaction: whatever each server knows, a range takes a small part
	// of what the fleet has left.
	Share int64
}

// String words w for errors.
func (w Window) String() string { return fmt.Sprintf("[%d, %d)", w.Floor, w.Limit) }
