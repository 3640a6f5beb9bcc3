-- leafd's access tokens of the ID routes, as in the MySQL migration: one row
-- per live token, deleted when revoked; token_hash is the hex SHA-256 of the
-- token's text, tags its comma-separated patterns, created_ms Unix
-- milliseconds.

-- +goose Up
CREATE TABLE IF NOT EXISTS leafd_token (
  id          VARCHAR(32)  NOT NULL,
  token_hash  CHAR(64)     NOT NULL,
  tags        TEXT         NOT NULL,
  description VARCHAR(256) NOT NULL DEFAULT '',
  created_ms  INTEGER      NOT NULL,
  PRIMARY KEY (id)
);

-- +goose Down
-- Deliberately empty: dropping the table would revoke every token.
