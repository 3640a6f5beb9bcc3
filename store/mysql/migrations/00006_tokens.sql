-- leafd's access tokens of the ID routes (segment.require_token,
-- snowflake.require_token): one row per live token, deleted when revoked.
-- token_hash is the hex SHA-256 of the token's text, which is shown once and
-- kept nowhere; tags are the token's patterns ("order", "pay*", "*"),
-- comma-separated; created_ms is Unix milliseconds. Java Leaf ignores the
-- table.

-- +goose Up
CREATE TABLE IF NOT EXISTS leafd_token (
  id          VARCHAR(32)  NOT NULL,
  token_hash  CHAR(64)     NOT NULL,
  tags        TEXT         NOT NULL,
  description VARCHAR(256) NOT NULL DEFAULT '',
  created_ms  BIGINT       NOT NULL,
  PRIMARY KEY (id)
) ENGINE=InnoDB DEFAULT CHARSET=utf8mb4;

-- +goose Down
-- Deliberately empty: dropping the table would revoke every token, which
-- the servers would then refuse.
