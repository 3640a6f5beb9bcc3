-- The segment table of Meituan Leaf, column for column, so that a database
-- already used by Java Leaf works unchanged. IF NOT EXISTS makes this
-- migration succeed, and change nothing, on such a database.

-- +goose Up
CREATE TABLE IF NOT EXISTS leaf_alloc (
  biz_tag     VARCHAR(128) NOT NULL DEFAULT '',
  max_id      BIGINT       NOT NULL DEFAULT 1,
  step        INT          NOT NULL,
  description VARCHAR(256) DEFAULT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB;

-- +goose Down
-- Deliberately empty. Dropping leaf_alloc would forget every tag's max_id,
-- and a table created again would hand out the same IDs a second time. Drop
-- it by hand if that is really meant.
