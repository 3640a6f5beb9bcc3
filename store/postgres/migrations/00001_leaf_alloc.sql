-- The segment table of Meituan Leaf in PostgreSQL's terms: the same
-- columns, names and defaults. biz_tag compares byte by byte (COLLATE "C"),
-- as leafd's tag names are exact; update_time is a timestamptz. PostgreSQL
-- has no ON UPDATE clause, so a trigger refreshes update_time on every
-- UPDATE that does not set it itself (leafd's own statements set it; the
-- trigger covers changes made by hand). IF NOT EXISTS makes this migration
-- succeed, and change no row, on a database that already has the table.

-- +goose Up
CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     VARCHAR(128) COLLATE "C" NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INTEGER      NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
);

-- +goose StatementBegin
CREATE OR REPLACE FUNCTION leafd_touch_update_time() RETURNS trigger
LANGUAGE plpgsql AS $$
BEGIN
  IF NEW.update_time IS NOT DISTINCT FROM OLD.update_time THEN
    NEW.update_time := CURRENT_TIMESTAMP;
  END IF;
  RETURN NEW;
END
$$;
-- +goose StatementEnd

DROP TRIGGER IF EXISTS leaf_alloc_update_time ON leaf_alloc;
CREATE TRIGGER leaf_alloc_update_time BEFORE UPDATE ON leaf_alloc
FOR EACH ROW EXECUTE FUNCTION leafd_touch_update_time();

-- +goose Down
-- Deliberately empty. Dropping leaf_alloc would forget every tag's max_id,
-- and a table created again would hand out the same IDs a second time. Drop
-- it by hand if that is really meant.
