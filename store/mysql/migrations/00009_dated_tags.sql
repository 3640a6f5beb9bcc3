-- The spec of a dated tag, whose IDs are the date number of their period
-- followed by a counter that starts at 1 in each period: period is day,
-- month or year; zone the IANA time zone the periods are counted in ('' for
-- UTC); digits (00005) the counter's width. max_step, when not 0, caps the
-- step servers choose for the tag. Empty on the rows of other formats.

-- +goose Up
-- The columns are added only where they are missing, so that the migration
-- runs again harmlessly when goose's version table lost its rows (see
-- 00008); MySQL has no ADD COLUMN IF NOT EXISTS, MariaDB's is not MySQL's.
SET @leafd_add_dated = (SELECT IF(COUNT(*) = 0,
  'ALTER TABLE leafd_tag_format ADD COLUMN period VARCHAR(16) NOT NULL DEFAULT '''', ADD COLUMN zone VARCHAR(64) NOT NULL DEFAULT '''', ADD COLUMN max_step BIGINT NOT NULL DEFAULT 0',
  'DO 0')
  FROM information_schema.COLUMNS
  WHERE TABLE_SCHEMA = DATABASE() AND TABLE_NAME = 'leafd_tag_format' AND COLUMN_NAME = 'period');
PREPARE leafd_add_dated FROM @leafd_add_dated;
EXECUTE leafd_add_dated;
DEALLOCATE PREPARE leafd_add_dated;

-- +goose Down
-- Deliberately empty: dropping the columns would leave dated tags without
-- their period and zone, and their IDs could no longer be made.
