-- Who belongs to a deployment of store.shards. leafd_database holds one
-- row: a random id that leafd writes into the database the first time it
-- is used as one of store.shards, and that names this database wherever
-- its address or DSN is written differently. leafd_shard.members lists the
-- ids of the deployment's databases in store.shards order, comma
-- separated: written in every database by the server that initialises or
-- extends the deployment, in the same transaction as the database's record,
-- so that two servers with different lists cannot both initialise, and
-- checked at every start against every database's own id. NULL in a
-- record written before this migration, until a server fills it in.

-- +goose Up
CREATE TABLE IF NOT EXISTS leafd_database (
  id          INT          NOT NULL,
  uid         VARCHAR(64)  NOT NULL,
  create_time TIMESTAMPTZ  NOT NULL DEFAULT CURRENT_TIMESTAMP,
  PRIMARY KEY (id)
);

-- IF NOT EXISTS: the migration runs again harmlessly when goose's version
-- table lost its rows.
ALTER TABLE leafd_shard ADD COLUMN IF NOT EXISTS members TEXT NULL;

-- +goose Down
-- Deliberately empty: dropping the ids or the member lists would let two
-- servers with different store.shards initialise the same databases, and
-- hand out IDs twice.
