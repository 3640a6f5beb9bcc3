-- The snowflake layout that the worker ids of leaf_worker are leased under:
-- one row (id 1), the epoch in Unix milliseconds and the bit widths, written
-- by the first claim of a worker id, in the claim's transaction, with the
-- claim's owner and the database's clock. Every later claim compares its
-- server's layout with it and is refused when they differ: worker id n of
-- two layouts issues overlapping IDs. A database whose leases predate this
-- table gets the layout of the first server to claim after the migration.

-- +goose Up
CREATE TABLE IF NOT EXISTS leafd_snowflake_layout (
  id            INT          NOT NULL,
  epoch_ms      BIGINT       NOT NULL,
  time_bits     INT          NOT NULL,
  worker_bits   INT          NOT NULL,
  sequence_bits INT          NOT NULL,
  recorded_by   VARCHAR(128) NOT NULL DEFAULT '',
  recorded_ms   BIGINT       NOT NULL DEFAULT 0,
  PRIMARY KEY (id)
) ENGINE=InnoDB;

-- +goose Down
-- Deliberately empty: dropping the table would let a server with another
-- layout lease the worker ids that this one's IDs were issued under.
