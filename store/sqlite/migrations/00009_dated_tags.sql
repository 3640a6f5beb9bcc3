-- The spec of a dated tag, whose IDs are the date number of their period
-- followed by a counter that starts at 1 in each period: period is day,
-- month or year; zone the IANA time zone the periods are counted in ('' for
-- UTC); digits (00005) the counter's width. max_step, when not 0, caps the
-- step servers choose for the tag. Empty on the rows of other formats.

-- +goose Up
ALTER TABLE leafd_tag_format ADD COLUMN period   VARCHAR(16) NOT NULL DEFAULT '';
ALTER TABLE leafd_tag_format ADD COLUMN zone     VARCHAR(64) NOT NULL DEFAULT '';
ALTER TABLE leafd_tag_format ADD COLUMN max_step INTEGER     NOT NULL DEFAULT 0;

-- +goose Down
-- Deliberately empty: dropping the columns would leave dated tags without
-- their period and zone, and their IDs could no longer be made.
