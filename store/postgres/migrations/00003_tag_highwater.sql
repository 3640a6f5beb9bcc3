-- leafd's own high-water mark per segment tag, as in the MySQL migration:
-- the largest max_id any leafd server has ever been handed for the tag, read
-- and raised in the transaction of every range load, which refuses
-- (tag_rewound) a range that starts below it.

-- +goose Up
CREATE TABLE IF NOT EXISTS leafd_tag_highwater (
  biz_tag     VARCHAR(128) COLLATE "C" NOT NULL,
  max_id      BIGINT       NOT NULL,
  update_time TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
);

-- +goose Down
-- Deliberately empty: dropping the table would forget the marks that stop a
-- rewound tag from handing out IDs again.
