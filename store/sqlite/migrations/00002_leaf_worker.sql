-- Snowflake worker id leases (docs/contract.md, Schema), as in the MySQL migration:
-- lease_until_ms by the database's clock, watermark_ms at or after every
-- timestamp ever issued under the worker id.

-- +goose Up
CREATE TABLE IF NOT EXISTS leaf_worker (
  worker_id      INTEGER      NOT NULL,
  owner          VARCHAR(128) NOT NULL DEFAULT '',
  lease_until_ms INTEGER      NOT NULL DEFAULT 0,
  watermark_ms   INTEGER      NOT NULL DEFAULT 0,
  update_time    TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (worker_id)
);

-- +goose Down
-- Deliberately empty: dropping the table would forget the watermarks that
-- keep a restarted server with its clock behind from reusing a worker id.
