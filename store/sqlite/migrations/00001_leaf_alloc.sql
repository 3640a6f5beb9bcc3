-- The segment table of Meituan Leaf in SQLite's terms: the same columns,
-- names and defaults. SQLite has no ON UPDATE clause, so a trigger refreshes
-- update_time on every UPDATE that does not set it itself (leafd's own
-- statements set it; the trigger covers changes made by hand). The CHECK
-- keeps max_id an integer: SQLite would otherwise store an overflowing sum
-- as a REAL without a word.

-- +goose Up
CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      INTEGER      NOT NULL DEFAULT 1 CHECK (typeof(max_id) = 'integer'),
  step        INTEGER      NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
);

-- +goose StatementBegin
CREATE TRIGGER IF NOT EXISTS leaf_alloc_update_time
AFTER UPDATE ON leaf_alloc
FOR EACH ROW WHEN NEW.update_time IS OLD.update_time
BEGIN
  UPDATE leaf_alloc SET update_time = CURRENT_TIMESTAMP WHERE biz_tag = NEW.biz_tag;
END;
-- +goose StatementEnd

-- +goose Down
-- Deliberately empty. Dropping leaf_alloc would forget every tag's max_id,
-- and a table created again would hand out the same IDs a second time. Drop
-- it by hand if that is really meant.
