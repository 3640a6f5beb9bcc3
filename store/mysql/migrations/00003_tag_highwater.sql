-- leafd's own high-water mark per segment tag: the largest max_id any
-- leafd server has ever been handed for the tag. Every range load reads and
-- raises it in the same transaction as its UPDATE of leaf_alloc, and refuses
-- (tag_rewound) a range that starts at or below it: a max_id lowered by hand,
-- or a tag deleted and created again, would otherwise hand out IDs a second
-- time. leaf_alloc is Meituan Leaf's and is never altered; this table is
-- leafd's alone, and Java Leaf ignores it. Deleting a tag from leaf_alloc
-- does not delete its mark.

-- +goose Up
CREATE TABLE IF NOT EXISTS leafd_tag_highwater (
  biz_tag     VARCHAR(128) NOT NULL,
  max_id      BIGINT       NOT NULL,
  update_time TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag)
) ENGINE=InnoDB;

-- +goose Down
-- Deliberately empty: dropping the table would forget the marks that stop a
-- rewound tag from handing out IDs again.
