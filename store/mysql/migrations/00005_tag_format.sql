-- The format of a segment tag that is not Leaf's sequential one: an opaque
-- tag maps every counter value through a keyed bijection of its domain to
-- the ID it hands out. digits is the domain in decimal digits (0: IDs below
-- 2^53); key_fingerprint identifies the key the tag was created with, so
-- that a server with another key refuses the tag. A tag without a row is
-- sequential. Leaf's leaf_alloc is not altered.

-- +goose Up
CREATE TABLE IF NOT EXISTS leafd_tag_format (
  biz_tag         VARCHAR(128) NOT NULL,
  format          VARCHAR(16)  NOT NULL,
  digits          INTEGER      NOT NULL DEFAULT 0,
  key_fingerprint VARCHAR(64)  NOT NULL DEFAULT '',
  update_time     TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB;

-- +goose Down
-- Deliberately empty: dropping the table would turn opaque tags sequential,
-- and their IDs would no longer be what clients were handed.
