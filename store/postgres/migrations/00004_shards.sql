-- leafd's sharding over independent databases (store.shards). Unused by a
-- server with a single database. leafd_shard holds one row: the
-- deployment this database belongs to, its slot count S, its place in
-- store.shards and how many databases there are. leafd_slot lists the
-- slots whose counters live here (state active, or leaving/gone while and
-- after a slot moves away). leafd_slot_alloc holds, per tag and slot, the
-- next ID of the slot: slot k hands out only IDs that are k modulo S.
-- Leaf's leaf_alloc is not altered.

-- +goose Up
CREATE TABLE IF NOT EXISTS leafd_shard (
  id          INT          NOT NULL,
  deployment  VARCHAR(64)  NOT NULL,
  slots       INT          NOT NULL,
  db_index    INT          NOT NULL,
  db_count    INT          NOT NULL,
  state       VARCHAR(16)  NOT NULL,
  update_time TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (id)
);

CREATE TABLE IF NOT EXISTS leafd_slot (
  slot        INT          NOT NULL,
  state       VARCHAR(16)  NOT NULL,
  update_time TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (slot)
);

CREATE TABLE IF NOT EXISTS leafd_slot_alloc (
  biz_tag     VARCHAR(128) COLLATE "C" NOT NULL,
  slot        INT          NOT NULL,
  max_id      BIGINT       NOT NULL,
  update_time TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (biz_tag, slot)
);

-- +goose Down
-- Deliberately empty: dropping these tables would forget where every slot's
-- counter is, and IDs would be handed out again.
