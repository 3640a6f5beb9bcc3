-- Snowflake worker id leases (docs/contract.md, Schema). One row per worker id that
-- has ever been leased. Times are Unix milliseconds: lease_until_ms by the
-- database's clock (it alone judges expiry), watermark_ms by the clock of
-- the servers that issued under the worker id: it is at or after every
-- timestamp ever issued under it, so that a server whose clock is behind it
-- never takes the worker id.

-- +goose Up
CREATE TABLE IF NOT EXISTS leaf_worker (
  worker_id      INT          NOT NULL,
  owner          VARCHAR(128) NOT NULL DEFAULT '',
  lease_until_ms BIGINT       NOT NULL DEFAULT 0,
  watermark_ms   BIGINT       NOT NULL DEFAULT 0,
  update_time    TIMESTAMP    NOT NULL DEFAULT CURRENT_TIMESTAMP ON UPDATE CURRENT_TIMESTAMP,
  PRIMARY KEY (worker_id)
) ENGINE=InnoDB;

-- +goose Down
-- Deliberately empty: dropping the table would forget the watermarks that
-- keep a restarted server with its clock behind from reusing a worker id.
