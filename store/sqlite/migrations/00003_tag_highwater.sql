-- leafd's own high-water mark per segment tag, as in the MySQL migration:
-- the largest max_id any leafd server has ever been handed for the tag, read
-- and raised in the transaction of every range load, which refuses
-- (tag_rewound) a range that starts at or below it. The CHECK keeps max_id
-- an integer, as in leaf_alloc.

-- +goose Up
CREATE TABLE IF NOT EXISTS leafd_tag_highwater (
  biz_tag     VARCHAR(128) NOT NULL,
  max_id      INTEGER      NOT NULL CHECK (typeof(max_id) = 'integer'),
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
);

-- +goose Down
-- Deliberately empty: dropping the table would forget the marks that stop a
-- rewound tag from handing out IDs again.
